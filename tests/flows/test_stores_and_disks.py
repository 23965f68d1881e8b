"""Stores and disks (#38): a store or disk that fails during the work (full, read-only, busy; MLflow's SQLite
errors, wrapped by SQLAlchemy and MLflow) is one line naming the store and the next step; a store another process
is writing is waited for (bounded, said) and then said busy, not damaged; a file that is not an OPI store and
stores, caches and run folders inside one another are refused in one line before any work."""
import errno
import logging
import sqlite3
import threading
from types import SimpleNamespace

import pytest
import sqlalchemy
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from sqlalchemy import event
from sqlalchemy.pool import Pool

from flows.base import store_checks
from flows.base.errors import EXIT_USER_ERROR, explained
from flows.base.store_checks import StoreError, intact_sqlite, separate_stores
from flows.tracking.store import mlflow_store_in_use, open_experiment
from opi.embeddings import EmbeddingStore
from opi.llm.cache import CallCache
from opi.schemas import TrackingConfig
from tests.helpers.cli import run_cli

AGAIN = "then run the same command again (finished stages are kept)"


def one_line(output: str, expected: str) -> None:
    assert expected in output, output[-2500:]
    assert "Traceback" not in output, output[-3000:]
    assert sum("ERROR" in line for line in output.splitlines()) == 1, output[-2500:]


def stores(folder, **settings):
    """The settings ``separate_stores`` reads, as the CLI tests set them (every store under ``folder``)."""
    paths = {"cache_dir": f"{folder}/cache", "llm_cache": f"{folder}/cache/llm_calls.sqlite",
             "embedding_store": f"{folder}/cache/embeddings.sqlite"}
    tracking = {"enabled": True, "tracking_uri": f"sqlite:///{folder}/mlruns/mlflow.db",
                "artifact_location": f"{folder}/mlruns/artifacts"}
    for key, value in settings.items():
        (paths if key in paths else tracking)[key] = value
    return SimpleNamespace(paths=SimpleNamespace(**paths), tracking=TrackingConfig(**tracking))


def held(path, seconds: float) -> threading.Thread:
    """Another writer holding ``path`` (an exclusive lock) for ``seconds``, from now."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(seconds, lambda: (holder.execute("ROLLBACK"), holder.close()))
    release.start()
    return release


def database(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    return path


# ---- during the work: the line names the store and the next step


@pytest.fixture
def mlflow_store(tmp_path):
    tracking = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                              artifact_location=f"{tmp_path}/artifacts")
    client, experiment = open_experiment(tracking, "stores")
    return client, client.create_run(experiment).info.run_id, tmp_path / "mlflow.db"


def test_mlflow_store_whose_disk_fills_is_one_line_naming_it(mlflow_store, caplog):
    client, run, path = mlflow_store

    def full(connection, record, proxy):  # SQLite's own "database or disk is full": no page can be added
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count={pages}")

    event.listen(Pool, "checkout", full)
    try:
        with pytest.raises(MlflowException) as failed:
            client.log_batch(run, metrics=[Metric(f"metric_{i}", float(i), 0, 0) for i in range(3000)])
    finally:
        event.remove(Pool, "checkout", full)
    assert explained(failed.value) == (f"cannot write results: the MLflow store {path.resolve()} "
                                       "(tracking.tracking_uri): its disk is full (database or disk is full): free "
                                       f"some space on that disk, {AGAIN}")
    assert "SQLAlchemy database error" not in caplog.text  # MLflow's logged traceback stays off the console


def test_mlflow_store_held_by_another_writer_is_waited_for_with_a_line(mlflow_store, caplog, monkeypatch):
    client, run, path = mlflow_store
    monkeypatch.setattr(store_checks, "BUSY_WAIT_S", 20)
    release = held(path, 1.5)
    with caplog.at_level(logging.WARNING, logger="opi"):
        client.set_tag(run, "written", "after the wait")
    release.join()
    assert f"{path} is busy (another process is writing to it): waiting up to 20 s" in caplog.text
    assert client.get_run(run).data.tags["written"] == "after the wait"


def test_mlflow_store_still_busy_is_one_line_saying_busy_not_damaged(tmp_path):
    mlflow_store_in_use(f"sqlite:///{tmp_path}/mlflow.db")
    path = tmp_path / "mlflow.db"
    try:  # as MLflow raises it: SQLite's error, wrapped by SQLAlchemy, wrapped by MLflow
        try:
            try:
                raise sqlite3.OperationalError("database is locked")
            except sqlite3.OperationalError as err:
                raise sqlalchemy.exc.OperationalError("UPDATE runs SET ...", {}, err) from err
        except sqlalchemy.exc.OperationalError as err:
            raise MlflowException(message=err, error_code="TEMPORARILY_UNAVAILABLE") from err
    except MlflowException as err:
        wrapped = err
    expected = (f"cannot write results: the MLflow store {path.resolve()} (tracking.tracking_uri): it is busy: "
                "another process is writing to it (it is not damaged) (database is locked): let that process "
                f"finish (or stop it), {AGAIN}")
    assert explained(wrapped) == expected
    assert explained(MlflowException(str(wrapped))) == expected  # handed back by a worker: the text alone


def test_a_full_disk_under_a_store_names_the_store(tmp_path):
    separate_stores(stores(tmp_path), {})
    for file, store in ((f"{tmp_path}/cache/results/abc", "the stage cache (paths.cache_dir)"),
                        (f"{tmp_path}/mlruns/artifacts/1/x/metrics.json",
                         "the MLflow artifacts (tracking.artifact_location)")):
        message = explained(OSError(errno.ENOSPC, "No space left on device", file))
        assert message == (f"cannot write results: No space left on device ({file}) in {store}: free some space "
                           f"on that disk, {AGAIN}")
    read_only = explained(OSError(errno.EROFS, "Read-only file system", f"{tmp_path}/cache/results/abc"))
    assert read_only.endswith(f"in the stage cache (paths.cache_dir): make it writable again, {AGAIN}")


def test_a_full_disk_without_a_file_name_names_the_store_whose_code_was_writing(tmp_path):
    separate_stores(stores(tmp_path), {})
    code = compile("def write():\n    raise OSError(errno.ENOSPC, 'No space left on device')\n",
                   "/site/flows/orchestration/cache_files.py", "exec")  # as f.write says it: no file name
    scope = {"errno": errno}
    exec(code, scope)
    with pytest.raises(OSError) as failed:
        scope["write"]()
    assert explained(failed.value) == (f"cannot write results: No space left on device ({tmp_path}/cache) in the "
                                       f"stage cache (paths.cache_dir): free some space on that disk, {AGAIN}")


def test_an_opi_store_fault_is_its_own_line(tmp_path):
    store = EmbeddingStore(tmp_path / "embeddings.sqlite")
    fault = store.fault(sqlite3.OperationalError("database or disk is full"))
    assert explained(RuntimeError("a task failed")) is None
    try:
        raise RuntimeError("the stage failed") from fault
    except RuntimeError as err:
        assert explained(err) == f"cannot write results: {fault}"


# ---- before any work: busy is not damaged; a file that is not an OPI store


def test_a_store_held_at_the_start_is_waited_for_then_checked(tmp_path, caplog, monkeypatch):
    path = database(tmp_path / "mlflow.db")
    monkeypatch.setattr(store_checks, "BUSY_WAIT_S", 20)
    release = held(path, 1.5)
    intact_sqlite(path, "tracking.tracking_uri", store_checks.MLFLOW_FIX)
    release.join()
    assert f"tracking.tracking_uri: {path} is busy (another process is writing to it): waiting up to 20 s" in \
        caplog.text


def test_a_store_still_held_at_the_start_is_busy_not_damaged(tmp_path, monkeypatch):
    path = database(tmp_path / "mlflow.db")
    monkeypatch.setattr(store_checks, "BUSY_WAIT_S", 1)
    release = held(path, 4)
    try:
        with pytest.raises(StoreError) as busy:
            intact_sqlite(path, "tracking.tracking_uri", store_checks.MLFLOW_FIX)
    finally:
        release.join()
    assert str(busy.value) == (f"tracking.tracking_uri: {path} is still busy after 1 s: another process is writing "
                               f"to it (it is not damaged): let that process finish (or stop it), {AGAIN}")
    intact_sqlite(path, "tracking.tracking_uri", store_checks.MLFLOW_FIX)  # free again: it passes


@pytest.mark.parametrize("store", [EmbeddingStore, CallCache])
def test_a_file_that_is_not_an_opi_store_is_refused_before_any_work(tmp_path, store):
    path = database(tmp_path / "store.sqlite")
    with pytest.raises(StoreError, match=r"setting: .*store.sqlite is not an OPI .* \(it holds the tables t\): "
                                         r"point setting at another file, or move this one away"):
        intact_sqlite(path, "setting", "move it away", store)
    made = tmp_path / "made.sqlite"
    store(made)
    intact_sqlite(made, "setting", "move it away", store)  # an OPI store of that kind passes


# ---- stores, caches and run folders inside one another


NESTED = {
    "embedding store in MLflow's database": (
        {"embedding_store": "{t}/mlruns/mlflow.db"}, {},
        "paths.embedding_store and tracking.tracking_uri are the same file ({t}/mlruns/mlflow.db): each store "
        "needs a file of its own; point paths.embedding_store at another file"),
    "LLM call cache in MLflow's database": (
        {"llm_cache": "{t}/mlruns/mlflow.db"}, {}, "paths.llm_cache and tracking.tracking_uri are the same file"),
    "embedding store and LLM call cache in one file": (
        {"embedding_store": "{t}/cache/llm_calls.sqlite"}, {},
        "paths.llm_cache and paths.embedding_store are the same file ({t}/cache/llm_calls.sqlite): each store "
        "needs a file of its own; point paths.llm_cache at another file"),
    "embedding store inside MLflow's artifacts": (
        {"embedding_store": "{t}/mlruns/artifacts/e.sqlite"}, {},
        "paths.embedding_store={t}/mlruns/artifacts/e.sqlite is inside tracking.artifact_location="
        "{t}/mlruns/artifacts: keep the stores apart (point paths.embedding_store elsewhere)"),
    "MLflow's database inside the stage cache": (
        {"tracking_uri": "sqlite:///{t}/cache/mlflow.db"}, {},
        "tracking.tracking_uri={t}/cache/mlflow.db is inside paths.cache_dir={t}/cache"),
    "run folder inside mlruns": (
        {}, {"hydra.run.dir": "{t}/mlruns/outputs/1"},
        "hydra.run.dir={t}/mlruns/outputs/1 is inside tracking.tracking_uri={t}/mlruns: a run's output folder is "
        "kept apart from the stores; point hydra.run.dir elsewhere"),
    "sweep folder inside the stage cache": (
        {}, {"hydra.sweep.dir": "{t}/cache/multirun"},
        "hydra.sweep.dir={t}/cache/multirun is inside paths.cache_dir={t}/cache"),
}


@pytest.mark.parametrize("case", list(NESTED))
def test_stores_inside_one_another_are_refused_naming_both_settings(tmp_path, case):
    settings, folders, expected = NESTED[case]
    t = tmp_path.resolve()
    config = stores(t, **{k: v.format(t=t) for k, v in settings.items()})
    with pytest.raises(StoreError) as refused:
        separate_stores(config, {k: type(t)(v.format(t=t)) for k, v in folders.items()})
    assert expected.format(t=t) in str(refused.value)


def test_the_usual_places_are_apart(tmp_path):
    t = tmp_path.resolve()
    separate_stores(stores(t), {"hydra.run.dir": t / "outputs" / "1"})  # the defaults' layout
    # mlflow.db in a project's folder (or a test's, a nightly's), whatever the working directory: its outputs/ and
    # multirun/ are beside the store, not inside MLflow's own folder
    separate_stores(stores(t, tracking_uri=f"sqlite:///{t}/mlflow.db", artifact_location=f"{t}/artifacts"),
                    {"hydra.run.dir": t / "outputs" / "1", "hydra.sweep.dir": t / "multirun"})
    separate_stores(stores(t, enabled=False, tracking_uri="sqlite:///nowhere"), {})


# ---- end to end: one line, exit 2, nothing made


def test_the_embedding_store_in_mlflows_database_is_refused_before_any_work(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset.limit=2", f"paths.embedding_store={tmp_path}/mlflow.db",
                     expect=EXIT_USER_ERROR)
    one_line(output, f"cannot write results: paths.embedding_store and tracking.tracking_uri are the same file "
                     f"({tmp_path.resolve()}/mlflow.db)")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_file_that_is_not_an_embedding_store_is_refused_before_any_work(tmp_path):
    path = tmp_path / "vectors.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE vectors (id INTEGER PRIMARY KEY, embedding BLOB)")
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset.limit=2", f"paths.embedding_store={path}",
                     expect=EXIT_USER_ERROR)
    one_line(output, f"cannot write results: paths.embedding_store: {path} is not an OPI embedding store (its table "
                     "'vectors' has the columns id, embedding): point paths.embedding_store at another file, or move "
                     "this one away")
    assert "rows read" not in output and not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_a_sweep_folder_inside_the_stage_cache_is_refused_before_the_sweep_starts(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "-m", "dataset.limit=2", f"hydra.sweep.dir={tmp_path}/cache/sweep",
                     expect=EXIT_USER_ERROR)
    expected = (f"cannot write results: hydra.sweep.dir={tmp_path.resolve()}/cache/sweep is inside paths.cache_dir="
                f"{tmp_path.resolve()}/cache: a run's output folder is kept apart from the stores")
    assert [line for line in output.splitlines() if "cannot write" in line or "Traceback" in line] == [
        line for line in output.splitlines() if expected in line], output[-2500:]  # one line (Hydra's sweep log)
    assert expected in output and not (tmp_path / "mlflow.db").exists() and not (tmp_path / "cache").exists()
