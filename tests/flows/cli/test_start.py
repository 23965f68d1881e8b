"""What every command does first: quiet, offline defaults that a user's own environment overrides, -v taken off
the command line (and kept for the processes it starts)."""
import json
import subprocess
import sys

PROBE = """
import json, os, sys, warnings
from flows.cli.start import start_command
start_command()
print(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in
      ("HF_HUB_OFFLINE", "DO_NOT_TRACK", "PREFECT_LOGGING_LEVEL", "OPI_VERBOSE", "OPI_RUN_TAG", "NO_PROXY")},
      "pid": os.getpid(), "quiet_notices": any(f[0] == "ignore" and f[1] is not None and "sunset" in f[1].pattern
                                               for f in warnings.filters)}))
"""


def start(*argv: str, env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_defaults_are_set_and_a_users_own_value_wins():
    seen = start("seed=1", env={"HF_HUB_OFFLINE": "0", "NO_PROXY": "corp.example"})
    assert seen["argv"] == ["seed=1"]
    assert seen["env"]["HF_HUB_OFFLINE"] == "0" and seen["env"]["DO_NOT_TRACK"] == "true"
    assert seen["env"]["PREFECT_LOGGING_LEVEL"] == "WARNING" and seen["quiet_notices"]
    assert seen["env"]["NO_PROXY"] == "corp.example,127.0.0.1,localhost"
    assert seen["env"]["OPI_RUN_TAG"] == str(seen["pid"])


def test_verbose_is_taken_off_the_command_line_and_keeps_third_party_output():
    seen = start("-v", "seed=1", env={})
    assert seen["argv"] == ["seed=1"] and seen["env"]["OPI_VERBOSE"] == "1"
    assert seen["env"]["PREFECT_LOGGING_LEVEL"] is None and not seen["quiet_notices"]


def test_a_secret_on_the_command_line_is_refused_before_anything_starts():
    result = subprocess.run([sys.executable, "-c", "from flows.cli.start import start_command; start_command()",
                             "setup=knn", "llm.api_key_env=sk-proj-abcdefghijklmnopqrstuvwx"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "invalid configuration: llm.api_key_env must be the name of an environment variable (letters, digits and "
        "_), not its value: put the key in a variable (export OPENAI_API_KEY=...) and give its name "
        "(llm.api_key_env=OPENAI_API_KEY)"]


def test_command_line_problems_cover_overrides_appends_and_options():
    from flows.cli.start import command_line_problem

    assert command_line_problem(["+llm.api_key=sk-1"]).startswith("llm.api_key would write a secret")
    assert command_line_problem(["--tracking-uri=http://u:p@mlflow/"]).startswith("tracking-uri holds credentials")
    assert command_line_problem(["'+retriever@retrievers.mine=custom'", "setup=a_two", "-m", "seed=0,1"]) is None


def test_sigterm_during_native_work_ends_with_its_status_after_the_exit_handlers(tmp_path):
    import signal
    import time

    # a liblinear fit that never converges, abandoned at SIGTERM; the C runtime's exit would unload scipy's
    # OpenBLAS under it (a segfault, -11); an exit hook registered after start (MLflow's, say) still runs
    script = f"""
import atexit, pathlib, sys
import numpy as np
from flows.cli.start import run_command, start_command
start_command()
from sklearn.svm import LinearSVC
from opi.retrievers.svm import fit_interruptibly
atexit.register(lambda: pathlib.Path({str(tmp_path / 'closed')!r}).write_text('closed'))
x = np.random.default_rng(0).normal(size=(1000, 384)); y = np.zeros(1000); y[0] = 1
print('fitting', flush=True)
run_command(lambda: fit_interruptibly(LinearSVC(C=1000, tol=1e-15, max_iter=10**9), x, y))
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "fitting"
    time.sleep(1)
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM, errors
    assert (tmp_path / "closed").read_text() == "closed"
