"""A Prefect server of a test's own and the processes a test starts against it, read through Prefect's API."""
import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.helpers.cli import free_port, prefect_home


def started(command, folder, env, name, cwd=None):
    """``command`` in its own session (so it is stopped whole), its output in ``folder/<name>.log``."""
    return subprocess.Popen(command, env=env, cwd=cwd or folder, stdin=subprocess.DEVNULL,
                            stdout=open(folder / f"{name}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def prefect_server(folder, home=None):
    """A Prefect server (``prefect server start``); the environment that points at it."""
    from opi.health import answers

    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home or prefect_home(folder)), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_RUNNER_POLL_FREQUENCY": "2",
           "PYTHONUNBUFFERED": "1"}
    server = started([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port),
                      "--no-ui"], folder, env, "server")
    try:
        deadline = time.monotonic() + 120
        while not answers(f"{env['PREFECT_API_URL']}/health"):
            assert server.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()
            time.sleep(0.5)
        yield env
    finally:
        stop(server)


def client_of(env):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}):
        return get_client(sync_client=True)


def deployment(client, name, watched, log, timeout=180):
    """The deployment ``name`` once ``watched`` (``opi-nightly serve``) has registered it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.read_deployment_by_name(name)
        except Exception:
            assert watched.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)


def finished(client, flow_run_id, timeout=240, watched=None, log=None):
    """The flow run once its state is final."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.read_flow_run(flow_run_id)
        if run.state and run.state.is_final():
            return run
        assert time.monotonic() < deadline and (watched is None or watched.poll() is None), \
            f"flow run {run.state_name}:\n" + (log.read_text()[-3000:] if log else "")
        time.sleep(1)
