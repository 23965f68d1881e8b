"""Run an OPI entry point in a subprocess, the way a user does, with every store under a test folder."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_MIGRATED: list[Path] = []  # a Prefect home whose database is migrated, made once per test session


def processes_with_env(name: str, value: str) -> list[int]:
    """Live processes whose environment has ``name=value`` (servers a run started and should have stopped)."""
    wanted = f"{name}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if wanted in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def cli_command(module: str, folder: Path, *overrides: str, cache: str = "cache", default_folders: bool = False
                ) -> list[str]:
    """The command line for an entry point with every store under ``folder`` (and Hydra's output folders too,
    unless ``default_folders``: then Hydra's defaults, relative to the working directory)."""
    # the tests run on the small deeplogic-130 unless they name their data (the default, deeplogic-v2, is 3x larger)
    quick = [] if any(o.startswith(("dataset=", "dataset.kind")) for o in overrides) or module not in (
        "flows.cli.evaluate", "flows.cli.train_classifier") else ["dataset=deeplogic-130"]
    stores = [f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
              f"paths.cache_dir={folder}/{cache}", f"paths.llm_cache={folder}/llm_calls.sqlite",
              *([] if default_folders else [f"hydra.sweep.dir={folder}/multirun", f"hydra.run.dir={folder}/outputs"])]
    given = {o.split("=", 1)[0] for o in overrides}
    if module in ("flows.cli.report", "flows.cli.annotate") or overrides[:1] == ("answers",):  # stores are options
        stores = []
    return [sys.executable, "-m", module, *overrides, *quick, *(s for s in stores if s.split("=", 1)[0] not in given)]


def prefect_home(folder: Path) -> Path:
    """``folder/prefect``: a Prefect home of the test's own, copied from one migrated once per session (a new home's
    database migration costs ~20 s of CPU at every command; tests of a new home's first use name one explicitly)."""
    if not _MIGRATED:
        template = Path(tempfile.mkdtemp(prefix="opi-test-prefect-home-"))
        subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], check=True,
                       capture_output=True, env={**os.environ, "PREFECT_HOME": str(template)}, timeout=300)
        _MIGRATED.append(template)
    home = folder / "prefect"
    if not home.exists():
        shutil.copytree(_MIGRATED[0], home)
    return home


def cli_environment(folder: Path, env: dict | None = None) -> dict:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if "PREFECT_HOME" not in (env or {}):
        environment["PREFECT_HOME"] = str(prefect_home(folder))
    environment.pop("PREFECT_API_URL", None)  # a user's server is not the test's
    environment.update(env or {})
    return environment


def run_cli(module: str, tmp_path: Path, *overrides: str, env: dict | None = None, cache: str = "cache",
            expect: int | None = 0, timeout: float = 1200) -> str:
    environment = cli_environment(tmp_path, env)
    command = cli_command(module, tmp_path, *overrides, cache=cache)
    # output to a file, not a pipe: a stray grandchild holding a pipe open would hang the test instead of failing it
    log_path = tmp_path / f"{module}-{len(list(tmp_path.glob('*.log')))}.log"
    with open(log_path, "w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, env=environment,
                              cwd=tmp_path, stdin=subprocess.DEVNULL).returncode
    output = log_path.read_text()
    leftovers = processes_with_env("PREFECT_HOME", environment["PREFECT_HOME"])
    deadline = time.monotonic() + 10  # children that are already exiting (Dask workers after their nanny) may finish
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.5)
        leftovers = processes_with_env("PREFECT_HOME", environment["PREFECT_HOME"])
    for pid in leftovers:
        os.kill(pid, 9)
    assert not leftovers, f"{module} left {len(leftovers)} process(es) running (a server it did not stop)"
    assert code == expect if expect is not None else code != 0, \
        f"exit {code} (expected {'non-zero' if expect is None else expect}):\n" + output[-4000:]
    return output


def start_cli(folder: Path, *overrides: str, env: dict | None = None, default_folders: bool = False
              ) -> tuple[subprocess.Popen, Path]:
    """Like run_cli, but returns the running process (its own session, so the test can kill it all)."""
    log = folder / f"started-{len(list(folder.glob('started-*.log')))}.log"
    command = cli_command("flows.cli.evaluate", folder, *overrides, default_folders=default_folders)
    environment = cli_environment(folder, env)
    # Ctrl-C as from a terminal: a test run started in the background by a non-interactive shell (`pytest &`)
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler in the command
    process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=environment, cwd=folder,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return process, log


def terminated(process: subprocess.Popen, started_when, wait: float, after: float = 0.5, timeout: float = 60
               ) -> tuple[int, float]:
    """SIGTERM to ``process`` ``after`` seconds past ``started_when()`` (waited for up to ``wait`` s): its exit code
    and how long it took to exit. The process is killed, whatever happens."""
    try:
        wait_for(lambda: started_when() or process.poll() is not None, wait, "the work to interrupt")
        assert process.poll() is None, "the process ended before it could be interrupted"
        time.sleep(after)
        os.kill(process.pid, signal.SIGTERM)
        started = time.monotonic()
        code = process.wait(timeout=timeout)
        return code, time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
