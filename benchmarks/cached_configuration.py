"""One configuration whose result is in the cache, as a user iterating meets it: ``opi-eval`` (kNN, the bundled
deeplogic-v2) run once to fill the cache, then timed again (best of ``--repeat``), beside the floor it is held to:
``python -c "import opi, flows"`` plus reading the configuration's kept result.

    python benchmarks/cached_configuration.py [--repeat 3] [-- overrides]

Printed: the cached command's wall (and when its result line appeared), the floor's two parts, and the ratio.
``--profile`` also writes a cProfile of the cached command's own process (``cached.prof``) to the folder given.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# what a cached command cannot do without: compose (Hydra), read (pandas' tables) and log (MLflow's SQL store)
STACK = "import hydra, omegaconf, mlflow, mlflow.store.tracking.sqlalchemy_store, pandas"

READ_KEPT = """
import sys, time
from flows.run.config import compose_config, typed
from flows.run.configuration import configuration_key
from flows.run.data import load_data
from flows.orchestration.kept import read_kept
from flows.run.preflight import chunking_for_language, resolve_gold
config = typed(compose_config(sys.argv[1:]))
data = load_data(config)
config = resolve_gold(chunking_for_language(config), data)  # as the command prepares it
key = configuration_key(config, data, None)
started = time.perf_counter()
assert read_kept(config.paths.cache_dir, key) is not None, "no kept result"
print(time.perf_counter() - started)
"""


def timed(command: list[str], folder: Path) -> tuple[float, float | None, str]:
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PREFECT_HOME": f"{folder}/prefect", "PYTHONUNBUFFERED": "1"})
    result_at, lines = None, []
    for line in process.stdout:
        lines.append(line)
        if result_at is None and "BERTSim" in line:
            result_at = time.perf_counter() - started
    process.wait()
    if process.returncode:
        raise SystemExit("".join(lines[-30:]))
    return time.perf_counter() - started, result_at, "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    overrides = ["dataset=deeplogic-v2", *args.overrides]
    with tempfile.TemporaryDirectory(prefix="opi-cached-") as name:
        folder = Path(name)
        stores = [f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"paths.cache_dir={folder}/cache",
                  f"paths.llm_cache={folder}/llm.sqlite", f"paths.embedding_store={folder}/embeddings.sqlite"]
        command = [sys.executable, "-m", "flows.cli.evaluate", *overrides, *stores]
        cold, _, _ = timed(command, folder)
        runs = [timed(command, folder) for _ in range(args.repeat)]
        wall, result_at, output = min(runs)
        imports = min(timed([sys.executable, "-c", "import opi, flows"], folder)[0] for _ in range(args.repeat))
        stack = min(timed([sys.executable, "-c", STACK], folder)[0] for _ in range(args.repeat))
        reads = [float(subprocess.run([sys.executable, "-c", READ_KEPT, *overrides, *stores], cwd=folder, check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1])
                 for _ in range(args.repeat)]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "cProfile", "-o", str(args.profile.resolve() / "cached.prof"), "-m",
                            "flows.cli.evaluate", *overrides, *stores], cwd=folder, check=True, capture_output=True,
                           env={**os.environ, "PREFECT_HOME": f"{folder}/prefect"})
    floor = imports + min(reads)
    load = os.getloadavg()[0]
    print(f"load {load:.1f} (1 min) on {os.cpu_count()} cores; cold run {cold:.1f} s")
    print(f"cached configuration: {wall:.2f} s wall (result line after {result_at:.2f} s), best of {args.repeat}")
    print(f"floor: `python -c 'import opi, flows'` {imports:.2f} s + reading its kept result {min(reads):.3f} s "
          f"= {floor:.2f} s")
    print(f"ratio: {wall / floor:.1f}x the floor (target <= 2x); wall target <= 3 s")
    print(f"the libraries it needs alone: `python -c '{STACK}'` {stack:.2f} s")
    print("reused" if "whole result, one read" in output else "NOT read whole from the cache")


if __name__ == "__main__":
    main()
