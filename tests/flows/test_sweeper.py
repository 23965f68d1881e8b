"""hydra_plugins/opi_sweeper: each job of a sweep is composed once, and a job that cannot be composed stops the
sweep before any job runs, in one line with exit 2."""
import subprocess

from flows.entry import EXIT_USER_ERROR
from tests.cli import cli_command, cli_environment, run_cli

COUNTING = """
import sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
composes = []
compose = ConfigLoaderImpl.load_sweep_config
ConfigLoaderImpl.load_sweep_config = lambda self, *a, **k: composes.append(a[1]) or compose(self, *a, **k)
from flows import evaluate
try:
    evaluate.main()
finally:
    print("composed:", sorted(" ".join(o) for o in composes))
"""


def test_each_job_of_a_sweep_is_composed_once(tmp_path):
    command = cli_command("flows.evaluate", tmp_path, "-m", "setup=dps,bm25,a_two", "dataset.limit=2",
                          "tracking=none", "report.enabled=false")
    command[1:3] = ["-c", COUNTING]  # the same command, through a Python that counts Hydra's compositions
    result = subprocess.run(command, capture_output=True, text=True, env=cli_environment(tmp_path), cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    composed = result.stdout.split("composed: ")[1]
    assert [composed.count(f"setup={name} ") for name in ("dps", "bm25", "a_two")] == [1, 1, 1], composed
    assert "[3/3" in result.stdout + result.stderr


def test_a_sweep_value_that_does_not_exist_stops_before_any_job(tmp_path):
    output = run_cli("flows.evaluate", tmp_path, "-m", "setup=dps,bm26", "dataset.limit=2", "report.enabled=false",
                     expect=EXIT_USER_ERROR)
    assert "cannot compose the configuration setup=bm26" in output and "Could not find 'setup/bm26'" in output
    assert "Traceback" not in output and "[1/2" not in output
