"""A team's stack from this repository, throwaway, on this machine: PostgreSQL (Debian's initdb/pg_ctl, a cluster
of its own on its own port and folder), an MLflow tracking server on it (artifacts in a folder), a Prefect server,
a process work pool and a worker. ``up`` starts it and prints the settings to use; ``status`` says what runs;
``down`` stops all of it (nothing left running; ``--purge`` also deletes the folder).

    python scripts/team_stack.py up [--folder .team-stack] [--host 127.0.0.1]
    python scripts/team_stack.py status
    python scripts/team_stack.py down [--purge]

Needs PostgreSQL's server programs (``apt-get install postgresql``) and ``pip install -e '.[team]'`` (psycopg, for
MLflow's SQLAlchemy). Run as root, the database runs as the ``postgres`` user (PostgreSQL refuses root).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

POOL = "opi"  # the work pool prefect.yaml's deployment names
STATE = "stack.json"


def free_port(host: str) -> int:
    with socket.socket() as s:
        try:
            s.bind((host, 0))
        except OSError as err:
            raise SystemExit(f"cannot listen on --host {host}: {err.strerror or err}") from None
        return s.getsockname()[1]


def log_tail(log: Path, lines: int = 5) -> str:
    """The last lines of a server's log, for the one line that says why it stopped."""
    try:
        kept = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()][-lines:]
    except OSError:
        return f"(no log at {log})"
    return f"{log}: ... " + " | ".join(kept)


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found and not shutil.which("pg_ctl"):
        raise SystemExit("PostgreSQL's server programs are not installed: apt-get install postgresql")
    return Path(found[-1]).parent if found else Path(shutil.which("pg_ctl")).parent


def as_database_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, its programs run as the ``postgres`` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def run(command: list[str], log: Path | None = None, **kwargs) -> None:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode:
        said = " ".join((done.stderr or done.stdout).split())[-800:]
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}): {said}"
                         + (f"; its log {log_tail(log)}" if log is not None else ""))


def wait_http(url: str, seconds: float, what: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} stopped at its start (exit code {process.returncode}); {log_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:  # a busy machine's server is slow, not down
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{what} did not answer {url} within {seconds:.0f} s; {log_tail(log)}")


def detached(command: list[str], log: Path, env: dict) -> subprocess.Popen:
    """A server in a session of its own (stopped with its whole process group), its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def database_folder(folder: Path) -> Path:
    """Where the cluster's files are: ``folder/postgres``; as root, a folder of the ``postgres`` user's under the
    system's temporary folder (``folder`` may sit where that user cannot reach, as under /root), named in
    ``folder/postgres.path`` so that the next ``up`` finds the same databases."""
    if os.geteuid() != 0:
        return folder / "postgres"
    named = folder / "postgres.path"
    if named.exists() and Path(named.read_text()).exists():
        return Path(named.read_text())
    data = Path(tempfile.mkdtemp(prefix="opi-team-postgres-"))
    user = pwd.getpwnam("postgres")
    os.chown(data, user.pw_uid, user.pw_gid)
    named.write_text(str(data))
    return data


def running(folder: Path) -> bool:
    """Whether a stack started from ``folder`` still has a process alive."""
    path = folder / STATE
    return path.exists() and any(alive(pid) for pid in json.loads(path.read_text())["pids"])


def up(folder: Path, host: str) -> dict:
    port = free_port(host)  # the host is usable before anything is made
    folder.mkdir(parents=True, exist_ok=True)
    binaries, data = postgres_bin(), database_folder(folder)
    state: dict = {"host": host, "pids": [], "folder": str(folder.resolve())}
    if not (data / "PG_VERSION").exists():
        run(as_database_user([str(binaries / "initdb"), "-D", str(data), "-U", "opi", "--auth=trust", "-E", "UTF8"]))
    state["postgres_port"] = port
    run(as_database_user([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"), "-w", "-o",
                          f"-p {port} -k {data} -c listen_addresses={host}", "start"]), log=data / "server.log")
    state["postgres_data"] = str(data)
    (folder / STATE).write_text(json.dumps(state))  # from here on, `down` stops what started
    created = subprocess.run([str(binaries / "createdb"), "-h", host, "-p", str(port), "-U", "opi", "mlflow"],
                             capture_output=True, text=True)
    if created.returncode and "already exists" not in created.stderr:
        raise SystemExit(f"createdb failed: {created.stderr[-500:]}")
    env = {**os.environ}
    env.pop("PREFECT_API_URL", None)
    state["mlflow_port"] = mlflow_port = free_port(host)
    backend = f"postgresql+psycopg://opi@{host}:{port}/mlflow"
    mlflow = detached([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend,
                       "--artifacts-destination", str((folder / "artifacts").resolve()), "--host", host,
                       "--port", str(mlflow_port), "--workers", "2"], folder / "mlflow.log", env)
    state["pids"].append(mlflow.pid)
    state["prefect_port"] = prefect_port = free_port(host)
    prefect_env = {**env, "PREFECT_HOME": str((folder / "prefect").resolve()),
                   "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    prefect = detached([sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port",
                        str(prefect_port)], folder / "prefect-server.log", prefect_env)
    state["pids"].append(prefect.pid)
    (folder / STATE).write_text(json.dumps(state))
    wait_http(f"http://{host}:{mlflow_port}/health", 120, "the MLflow server", mlflow, folder / "mlflow.log")
    wait_http(f"http://{host}:{prefect_port}/api/health", 120, "the Prefect server", prefect,
              folder / "prefect-server.log")
    api = {**prefect_env, "PREFECT_API_URL": f"http://{host}:{prefect_port}/api"}
    pool = subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", POOL, "--type", "process"],
                          capture_output=True, text=True, env=api)
    if pool.returncode and "already exists" not in pool.stdout + pool.stderr:
        raise SystemExit(f"creating the work pool failed: {(pool.stdout + pool.stderr)[-500:]}")
    repository = Path(__file__).resolve().parents[1]
    worker = detached([sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL],
                      folder / "prefect-worker.log", {**api, "OPI_REPO": str(repository)})
    state["pids"].append(worker.pid)
    state["settings"] = settings(state)
    (folder / STATE).write_text(json.dumps(state))
    return state


def settings(state: dict) -> dict:
    host, folder = state["host"], state["folder"]
    return {"tracking.tracking_uri": f"http://{host}:{state['mlflow_port']}",
            "PREFECT_API_URL": f"http://{host}:{state['prefect_port']}/api",
            "paths.cache_dir": f"{folder}/cache"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def down(folder: Path, purge: bool) -> list[str] | None:
    """Stops what ``up`` started (None: nothing had started), and with ``purge`` deletes the folder and the
    cluster's files; returns what had to be killed."""
    path = folder / STATE
    if not path.exists():
        if purge:
            remove(folder)
        return None
    state = json.loads(path.read_text())
    left = []
    for pid in reversed(state["pids"]):  # the worker first, then the servers
        if alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in state["pids"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in state["pids"]:
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)
            left.append(f"pid {pid} killed after 30 s")
    if "postgres_data" in state and Path(state["postgres_data"], "postmaster.pid").exists():
        run(as_database_user([str(postgres_bin() / "pg_ctl"), "-D", state["postgres_data"], "-m", "fast", "-w",
                              "stop"]))
    path.unlink()
    if purge:
        remove(folder)
    return left


def remove(folder: Path) -> None:
    """The stack's folder and, as root, the cluster's files it names."""
    if (folder / "postgres.path").exists():
        shutil.rmtree(Path((folder / "postgres.path").read_text()), ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def status(folder: Path) -> dict:
    path = folder / STATE
    if not path.exists():
        return {"running": False}
    state = json.loads(path.read_text())
    checks = {"mlflow": f"http://{state['host']}:{state['mlflow_port']}/health",
              "prefect": f"http://{state['host']}:{state['prefect_port']}/api/health"}
    answers = {}
    for name, url in checks.items():
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:  # a busy machine's server is slow, not down
                answers[name] = reply.status == 200
        except OSError:
            answers[name] = False
    ready = subprocess.run([str(postgres_bin() / "pg_isready"), "-h", state["host"], "-p",
                            str(state["postgres_port"])], capture_output=True)
    answers["postgres"] = ready.returncode == 0
    answers["worker"] = alive(state["pids"][-1]) if len(state["pids"]) == 3 else False
    return {"running": all(answers.values()), **answers, "settings": state.get("settings", {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--folder", type=Path, default=Path(".team-stack"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--purge", action="store_true", help="down: also delete the folder (databases, artifacts)")
    args = parser.parse_args()
    if args.command == "up":
        if running(args.folder):  # before the try: a failed start stops what it started, never a running stack
            raise SystemExit(f"a stack is already running from {args.folder}: `down` first (`status` says what runs)")
        try:
            state = up(args.folder, args.host)
        except BaseException:
            down(args.folder, purge=False)
            raise
        print("the team stack is up; use:")
        for name, value in state["settings"].items():
            print(f"  export {name}={value}" if name.isupper() else f"  {name}={value}")
        print(f"then: opi-eval tracking.tracking_uri={state['settings']['tracking.tracking_uri']} "
              f"paths.cache_dir={state['settings']['paths.cache_dir']} ...")
    elif args.command == "down":
        purged = " and its folder deleted" if args.purge else ""
        left = down(args.folder, args.purge)
        if left is None:
            print(f"no team stack was running from {args.folder}{'; its folder deleted' if args.purge else ''}")
        else:
            print(f"the team stack is down{purged}" + (f" ({'; '.join(left)})" if left else ""))
    else:
        print(json.dumps(status(args.folder), indent=2))


if __name__ == "__main__":
    main()
