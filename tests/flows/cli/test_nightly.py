"""opi-nightly end to end: a baseline it matches passes, a degraded configuration fails (message, tag, exit code),
a baseline on other examples is compared on the shared ones or refused, and `serve` registers a cron deployment on a
Prefect server."""
import re
import sys

import mlflow
import pandas as pd
import pytest

from flows.tracking.sweeps import children
from tests.flows.nightly.servers import client_of, deployment, prefect_server, started, stop
from tests.helpers.cli import processes_with_env, run_cli
from tests.helpers.paths import ROOT as REPOSITORY

# two configurations on 26 bundled examples (2 per relation): small, but enough for the paired test to see a real drop
SET = ["hydra.sweeper.params.setup='knn,bm25'", "dataset=deeplogic-130", "dataset.sample=26",
       "classifier.folds=2", "report.enabled=false"]


def nightly(tmp_path, *args, expect=0):
    return run_cli("flows.cli.nightly", tmp_path, "run", *args, *SET, expect=expect)


def sweeps(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi").experiment_id
    return client, client.search_runs([experiment], "tags.`opi.role` = 'sweep'", order_by=["start_time ASC"])


@pytest.mark.slow
def test_nightly_passes_against_its_baseline_compares_shared_examples_fails_a_degraded_retriever(tmp_path):
    """A champion on 26 of 52 examples: the same night again passes with identical numbers; a night on all 52 is
    compared on the 26 both have (one line says so); a degraded retriever fails (message, tag, exit code) and does
    not move the baseline; a night on 20 of a baseline's 52 is refused before its sweep."""
    examples = [s for s in SET if not s.startswith("dataset.sample")] + ["dataset.sample=52"]

    def nightly_of(*args, expect=0):
        return run_cli("flows.cli.nightly", tmp_path, "run", *args, *examples, expect=expect)

    def verdicts_of(run):
        return pd.read_csv(client.download_artifacts(run.info.run_id, "nightly/verdicts.csv", str(tmp_path)))

    first = nightly_of("--promote", "dataset.limit=26")
    assert "no baseline yet" in first and "is now the nightly baseline" in first
    client, runs = sweeps(tmp_path)
    champion = runs[0].info.run_id
    assert runs[0].data.tags["opi.baseline"] == "champion"

    second = nightly_of("dataset.limit=26")  # unchanged: every stage from the cache, identical numbers
    assert "no regression against run " + champion in second
    _, runs = sweeps(tmp_path)
    assert runs[1].data.tags["regression"] == "false"
    verdicts = verdicts_of(runs[1])
    assert len(verdicts) == 6 and set(verdicts["verdict"]) == {"ok"} and (verdicts["change"] == 0).all()

    wider = nightly_of()
    assert "comparing on the 26 examples both runs share (baseline 26, tonight 52)" in wider
    assert "paired permutation tests by article" in wider and "no regression against run " + champion in wider
    _, runs = sweeps(tmp_path)
    verdicts = verdicts_of(runs[2])
    assert len(verdicts) == 6 and set(verdicts["verdict"]) == {"ok"} and (verdicts["change"] == 0).all()

    # the reader answers from one sentence of one chunk: answers lose most of what they needed
    degraded = nightly_of("--promote", "dataset.limit=26", "retriever.k=1", "llm.reader.n_sentences=1", expect=1)
    assert "regressed against the baseline (run " + champion in degraded
    fell = r"\nkNN[^\n]*: bertsim fell [0-9.]+ \([0-9.]+ -> [0-9.]+, p = [0-9.]+, adjusted [0-9.]+\)"
    assert re.search(fell, degraded)
    _, runs = sweeps(tmp_path)
    assert runs[3].data.tags["regression"] == "true"
    assert runs[0].data.tags["opi.baseline"] == "champion"  # a failing night never moves the baseline

    refused = nightly_of("--baseline", runs[2].info.run_id, "dataset.limit=20", expect=2)
    assert (f"baseline run {runs[2].info.run_id}: tonight's run has 20 of the baseline's 52 examples (38%, tonight "
            "20), below min_overlap 90%") in refused
    assert "Launching" not in refused and len(sweeps(tmp_path)[1]) == 4  # refused before any work


@pytest.mark.slow
def test_a_raced_night_judges_an_eliminated_configuration_on_the_rounds_it_ran(tmp_path):
    """The nightly races too: EDI, dropped after the first of 4 rounds (a lax alpha, to drop one on 52 examples), is
    judged against the champion on its 13 examples, the survivors on all 52; one line says so."""
    raced = ["hydra.sweeper.params.setup='knn,edi,s_two'", "sweep.strategy=race", "race.rounds=4",
             "race.min_clusters=2", "race.margin=0", "race.metric=bertsim",
             *[s for s in SET if not s.startswith("hydra.sweeper")], "dataset.sample=52"]
    run_cli("flows.cli.nightly", tmp_path, "run", "--promote", *raced)
    night = run_cli("flows.cli.nightly", tmp_path, "run", *raced, "race.alpha=0.9")
    assert ("EDI | extractive | local-clf: judged on the 13 of the 52 shared examples that both its runs have"
            in night)
    assert "no regression against run" in night
    client, runs = sweeps(tmp_path)
    outcomes = {run.data.tags["opi.setup"]: (run.data.tags["opi.race.outcome"], run.data.tags.get("opi.race.rounds_run"))
                for run in children(client, runs[1].info.run_id)}
    assert outcomes == {"EDI": ("eliminated", "1 of 4"), "kNN": ("survivor", "4 of 4"),
                        "S-Two": ("survivor", "4 of 4")}
    verdicts = pd.read_csv(client.download_artifacts(runs[1].info.run_id, "nightly/verdicts.csv", str(tmp_path)))
    assert len(verdicts) == 9 and set(verdicts["verdict"]) == {"ok"}


@pytest.mark.slow
def test_a_baseline_that_is_not_a_sweep_stops_before_the_sweep_runs(tmp_path):
    output = run_cli("flows.cli.nightly", tmp_path, "run", "--baseline", "0123456789abcdef", *SET, expect=2)
    assert "cannot exist" in output or "is not in this MLflow store" in output
    assert "Launching" not in output  # nothing was evaluated


def test_serve_without_a_server_says_so(tmp_path):
    from tests.helpers.cli import free_port

    output = run_cli("flows.cli.nightly", tmp_path, "serve", env={"PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"},
                     expect=2)
    assert "does not answer" in output and "prefect server start" in output


@pytest.mark.slow
def test_serve_registers_a_cron_deployment_on_the_prefect_server(tmp_path):
    with prefect_server(tmp_path) as env:
        serve = started([sys.executable, "-m", "flows.cli.nightly", "serve", "--cron", "30 2 * * *", "dataset.limit=26"],
                        tmp_path, env, "serve")
        try:
            found = deployment(client_of(env), "opi-nightly/opi-nightly", serve, tmp_path / "serve.log")
        finally:
            stop(serve)
    (schedule,) = found.schedules
    assert schedule.schedule.cron == "30 2 * * *" and schedule.schedule.timezone == "UTC"
    assert found.parameters["overrides"] == ["dataset.limit=26"]
    assert found.parameters["baseline"] == "champion" and found.parameters["min_overlap"] == 0.9
    assert not processes_with_env("PREFECT_HOME", env["PREFECT_HOME"])


def test_prefect_yaml_deploys_the_nightly_flow():
    import inspect

    import yaml

    from flows.nightly.gate import nightly as nightly_flow

    root = REPOSITORY
    (deployment,) = yaml.safe_load((root / "prefect.yaml").read_text())["deployments"]
    path, name = deployment["entrypoint"].split(":")
    assert (root / path).exists() and name == nightly_flow.fn.__name__
    assert deployment["schedules"][0]["cron"] == "0 2 * * *"
    assert set(deployment["parameters"]) <= set(inspect.signature(nightly_flow.fn).parameters)


def test_the_readme_and_the_nightly_set_agree_and_its_quoted_set_is_one_value():
    """The README's count is the set's, and the commands that name another set (the set's own comment, the README)
    quote it: one value the sweeper reads as a list of setups that exist (unquoted, Hydra refuses a sweep there)."""
    import shlex

    import yaml
    from hydra.core.override_parser.overrides_parser import OverridesParser

    conf = REPOSITORY / "conf" / "experiment" / "nightly.yaml"
    setups = yaml.safe_load(conf.read_text())["hydra"]["sweeper"]["params"]["setup"].split(",")
    readme = (REPOSITORY / "README.md").read_text()
    section = readme[readme.index("## Nightly regression runs"):readme.index("## The relation classifier")]
    assert f"({len(setups)} configurations" in section and len(setups) == 15
    commands = [line.split("#", 1)[1].strip() for line in conf.read_text().splitlines() if "opi-nightly run" in line
                and "setup=" in line]
    commands += [line.split("  #")[0] for line in section.splitlines() if line.startswith("opi-nightly run \"hydra")]
    parser, known = OverridesParser.create(), {path.stem for path in (REPOSITORY / "conf" / "setup").glob("*.yaml")}
    assert len(commands) == 2
    for command in commands:
        (argument,) = [a for a in shlex.split(command) if a.startswith("hydra.sweeper.params.setup=")]
        override = parser.parse_override(argument)
        assert not override.is_sweep_override() and set(override.value().split(",")) <= known, command
    assert parser.parse_override("hydra.sweeper.params.setup=knn,bm25").is_sweep_override()
