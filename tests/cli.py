"""Run an OPI entry point in a subprocess, the way a user does, with every store under a test folder."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


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
        "flows.evaluate", "flows.train_classifier") else ["dataset=deeplogic-130"]
    stores = [f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
              f"paths.cache_dir={folder}/{cache}", f"paths.llm_cache={folder}/llm_calls.sqlite",
              *([] if default_folders else [f"hydra.sweep.dir={folder}/multirun", f"hydra.run.dir={folder}/outputs"])]
    given = {o.split("=", 1)[0] for o in overrides}
    return [sys.executable, "-m", module, *overrides, *quick, *(s for s in stores if s.split("=", 1)[0] not in given)]


def cli_environment(folder: Path, env: dict | None = None) -> dict:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "PREFECT_HOME": str(folder / "prefect")}
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
    leftovers = processes_with_env("PREFECT_HOME", str(tmp_path / "prefect"))
    deadline = time.monotonic() + 10  # children that are already exiting (Dask workers after their nanny) may finish
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.5)
        leftovers = processes_with_env("PREFECT_HOME", str(tmp_path / "prefect"))
    for pid in leftovers:
        os.kill(pid, 9)
    assert not leftovers, f"{module} left {len(leftovers)} process(es) running (a server it did not stop)"
    assert code == expect if expect is not None else code != 0, \
        f"exit {code} (expected {'non-zero' if expect is None else expect}):\n" + output[-4000:]
    return output
