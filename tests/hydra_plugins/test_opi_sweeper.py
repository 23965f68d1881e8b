"""hydra_plugins/opi_sweeper: the basic sweeper's expansion on Hydra's public plugin interfaces, each job composed
once, and a job that cannot be composed stopping the sweep before any job runs, in one line with exit 2."""
import subprocess

import pytest

from flows.base.errors import EXIT_USER_ERROR
from hydra_plugins.opi_sweeper import ComposedOnce, expand, extended
from tests.helpers.cli import cli_command, cli_environment, run_cli

COUNTING = """
from hydra.core.config_loader import ConfigLoader
from flows.cli import evaluate  # imports Hydra's config loader
composes = []

def counting(load):  # every composition of a job, by the preflight's checks or the sweeper's launcher
    def load_sweep_config(self, master, overrides):
        composes.append(" ".join(overrides))
        return load(self, master, overrides)
    return load_sweep_config

for implementation in ConfigLoader.__subclasses__():
    implementation.load_sweep_config = counting(implementation.load_sweep_config)
try:
    evaluate.main()
finally:
    print("composed:", sorted(composes))
"""


def test_the_sweep_is_the_basic_sweepers_product_params_first():
    sweep = expand({"setup": "knn,bm25"}, ["seed=0,1", "dataset.limit=3"])
    assert sweep.jobs == [["setup=knn", "seed=0", "dataset.limit=3"], ["setup=knn", "seed=1", "dataset.limit=3"],
                          ["setup=bm25", "seed=0", "dataset.limit=3"], ["setup=bm25", "seed=1", "dataset.limit=3"]]
    assert sweep.replaced == {}
    replaced = expand({"setup": "knn,bm25"}, ["setup=a_four"])  # the command line wins, as with Hydra's sweeper
    assert replaced.jobs == [["setup=a_four"]] and replaced.replaced == {"setup": ("setup=knn,bm25", "setup=a_four")}


def test_a_union_of_grids_is_each_grids_product_once_crossed_with_params_and_the_command_line():
    grids = [{"retriever": "knn,bm25", "retriever.k": "2,4"}, {"setup": "a_two"},
             {"retriever": "knn", "retriever.k": "2"}]
    sweep = expand({"dataset.limit": "3"}, ["seed=0,1"], grids=grids)
    assert sweep.jobs == [[f"dataset.limit=3", f"retriever={r}", f"retriever.k={k}", f"seed={seed}"]
                          for r in ("knn", "bm25") for k in (2, 4) for seed in (0, 1)] + \
        [["dataset.limit=3", "setup=a_two", f"seed={seed}"] for seed in (0, 1)]  # the third grid's job is the first's
    assert expand({}, ["retriever.k=8"], grids=grids).replaced == {"retriever.k": ("retriever.k=2,4", "retriever.k=8")}


def test_a_grids_values_are_written_as_overrides():
    from hydra_plugins.opi_sweeper import grids_of

    grids = grids_of({"grids": [{"retriever.k": 4, "combination.k": None, "report.enabled": False, "setup": "a,b"}]})
    assert grids == [{"retriever.k": "4", "combination.k": "null", "report.enabled": "false", "setup": "a,b"}]


def test_the_retriever_grid_experiment_is_the_seven_by_k_by_chunking_and_the_six_combinations():
    from omegaconf import OmegaConf

    from flows.run.config import CONF_DIR
    from hydra_plugins.opi_sweeper import sweep_of

    experiment = OmegaConf.load(f"{CONF_DIR}/experiment/retriever_grid.yaml")
    jobs = sweep_of(OmegaConf.merge(experiment, {"hydra": {"overrides": {"task": ["dataset.limit=2"]}}})).jobs
    singles = [job for job in jobs if job[0].startswith("retriever=")]
    assert len(jobs) == 48 and len(singles) == 42 and len({tuple(job) for job in jobs}) == 48
    combinations = ("a_seven", "a_four", "a_two", "s_seven", "s_four", "s_two")
    assert {job[0] for job in jobs if job not in singles} == {f"setup={name}" for name in combinations}


def test_range_sweeps_expand_and_other_sweep_types_are_refused():
    assert expand({}, ["seed=range(0,3)"]).jobs == [["seed=0"], ["seed=1"], ["seed=2"]]
    with pytest.raises(Exception, match="does not support sweep type"):
        expand({}, ["seed=interval(0,1)"])


def test_the_launcher_gets_each_composed_configuration_once():
    class Loader:
        calls = 0

        def load_sweep_config(self, master, overrides):
            Loader.calls += 1
            return {"composed": overrides}

    master, loader = object(), ComposedOnce(Loader(), None)
    loader.master = master
    loader.checked[("a=1",)] = {"checked": True}
    assert loader.load_sweep_config(master, ["a=1"]) == {"checked": True} and Loader.calls == 0
    assert loader.load_sweep_config(master, ["a=1"]) == {"composed": ["a=1"]} and Loader.calls == 1  # handed once


def test_a_job_composed_before_the_sweep_is_handed_over_only_for_that_sweeps_master():
    from omegaconf import OmegaConf

    from hydra_plugins.opi_sweeper import composed_before, forget_composed, keep_composed

    master, other, job = OmegaConf.create({"a": 1}), OmegaConf.create({"a": 2}), OmegaConf.create({"job": 1})
    keep_composed(master, ["setup=knn"], job)
    assert composed_before(master, ["setup=knn"]) is job
    assert composed_before(master, ["setup=bm25"]) is None and composed_before(other, ["setup=knn"]) is None
    forget_composed()
    assert composed_before(master, ["setup=knn"]) is None


@pytest.mark.slow
def test_each_job_of_a_sweep_is_composed_once(tmp_path):
    command = cli_command("flows.cli.evaluate", tmp_path, "-m", "setup=dps,bm25,a_two", "dataset.limit=2",
                          "tracking=none", "report.enabled=false")
    command[1:3] = ["-c", COUNTING]  # the same command, through a Python that counts the compositions
    result = subprocess.run(command, capture_output=True, text=True, env=cli_environment(tmp_path), cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    composed = result.stdout.split("composed: ")[1]
    assert [composed.count(f"'setup={name} ") for name in ("dps", "bm25", "a_two")] == [1, 1, 1], composed
    assert "[3/3" in result.stdout + result.stderr


def test_a_sweep_over_a_union_of_grids_runs_each_grids_jobs(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "-m",
                     "hydra.sweeper.grids=[{retriever:'knn,bm25'},{setup:a_two}]",
                     "dataset.limit=2", "tracking=none", "report.enabled=false")
    assert "3 configurations on" in output and "[3/3" in output
    jobs = [(tmp_path / "multirun" / str(job) / ".hydra" / "overrides.yaml") for job in range(4)]
    assert [job.exists() for job in jobs] == [True, True, True, False]
    firsts = [job.read_text().splitlines()[0] for job in jobs[:3]]
    assert firsts == ["- retriever=knn", "- retriever=bm25", "- setup=a_two"]


def test_a_sweep_value_that_does_not_exist_stops_before_any_job(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "-m", "setup=dps,bm26", "dataset.limit=2",
                     "report.enabled=false", expect=EXIT_USER_ERROR)
    assert "cannot compose the configuration setup=bm26" in output and "Could not find 'setup/bm26'" in output
    assert "Traceback" not in output and "[1/2" not in output


ROUND = ["dataset.rounds=10", "dataset.rounds_from=3", "dataset.rounds_to=3", "tracking.enabled=false",
         "report.enabled=false"]


@pytest.fixture
def config_loader():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from flows.run.config import CONF_DIR, register_configs

    register_configs()
    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        yield GlobalHydra.instance().config_loader()


def test_a_job_extended_by_value_overrides_is_the_job_composed_with_them(config_loader):
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    master = config_loader.load_configuration("config", ["hydra.job.chdir=false", "dataset.limit=16"], RunMode.MULTIRUN)
    job = ["setup=bm25", "retriever.k=2", "dataset.limit=16"]
    composed = config_loader.load_sweep_config(master, job)
    got = extended(composed, ROUND)
    want = config_loader.load_sweep_config(master, job + ROUND)
    assert OmegaConf.to_container(got) == OmegaConf.to_container(want)
    assert got.dataset.rounds == 10 and got.tracking.enabled is False and composed.dataset.rounds is None
    assert got.hydra.job.override_dirname == want.hydra.job.override_dirname != composed.hydra.job.override_dirname
    for group_or_new in (["retriever=knn"], ["+extra=1"], ["hydra.job.chdir=true"], ["seed=1,2"]):
        with pytest.raises(ValueError, match="only a value override"):
            extended(composed, group_or_new)
