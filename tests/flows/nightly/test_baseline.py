"""The nightly's baseline (``flows.nightly.baseline``) without an MLflow server: a committed baseline file read from
tmp_path (and a damaged one as a one-line command error), the answers when the store has no experiment yet, promotion
moving the champion tag from the previous champion (on a fake client recording its calls), the labelled-sweep and
sweep-run checks, and the promotion lock's file (beside a SQLite store, else in the cache's lock folder) held
against a second nightly. Whole nights deciding and promoting on a real store are in
tests/flows/nightly/test_gate.py."""
import hashlib
import logging
import threading
import time
from types import SimpleNamespace

import pytest
from filelock import FileLock, Timeout
from mlflow.exceptions import MlflowException

from flows.base.errors import CommandError
from flows.nightly import CHAMPION, CHAMPION_TAG
from flows.nightly.baseline import (champion, labelled_sweep, load_baseline, lock_file, promote, promotion_lock,
                                    sweep_run)
from opi.regression import write_baseline_file


def run(run_id, **tags):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, lifecycle_stage="active"),
                           data=SimpleNamespace(tags=tags))


class FakeClient:
    """The MlflowClient calls the baseline makes: searches answer ``found``, tag changes and queries are recorded."""

    def __init__(self, found=(), runs=None):
        self.found, self.runs, self.calls = list(found), runs or {}, []

    def search_runs(self, experiments, query, **options):
        self.calls.append(("search", tuple(experiments), query, options))
        return self.found

    def get_run(self, run_id):
        if run_id not in self.runs:
            raise MlflowException(f"Run '{run_id}' not found")
        return self.runs[run_id]

    def delete_tag(self, run_id, key):
        self.calls.append(("delete", run_id, key))

    def set_tag(self, run_id, key, value):
        self.calls.append(("set", run_id, key, value))


def test_a_baseline_file_is_read_as_numbers_and_a_damaged_one_is_a_command_error(tmp_path):
    path = write_baseline_file(tmp_path / "b.json", {"kNN": {"opi_1": 0.5, "bertsim": 0.75, "lrcr": 1}}, "a test",
                               {"opi.dataset": "deeplogic"})
    baseline = load_baseline(None, None, str(path))  # a file needs neither client nor experiment
    assert baseline.name == str(path) and baseline.rows is None and baseline.run_id is None
    assert baseline.metrics == {"kNN": {"opi_1": 0.5, "bertsim": 0.75, "lrcr": 1.0}}
    assert baseline.yardsticks == {"file": {"opi.dataset": "deeplogic"}}
    (tmp_path / "empty.json").write_text('{"configurations": {}}')
    with pytest.raises(CommandError, match=r"empty\.json: expected a non-empty 'configurations' object$"):
        load_baseline(None, None, str(tmp_path / "empty.json"))
    with pytest.raises(CommandError, match=r"^baseline file .*none\.json does not exist$"):
        load_baseline(None, None, str(tmp_path / "none.json"))


def test_a_store_without_an_experiment_has_no_champion_and_no_baseline_run():
    assert champion(None, None) is None and load_baseline(None, None, CHAMPION) is None
    with pytest.raises(CommandError, match="^baseline run abc123 cannot exist: this MLflow store has no experiment yet$"):
        load_baseline(None, None, "abc123")


def test_promotion_moves_the_champion_tag_from_the_previous_champion():
    client = FakeClient(found=[run("old")])
    promote(client, "7", "new")
    assert client.calls == [
        ("search", ("7",), f"tags.`{CHAMPION_TAG}` = '{CHAMPION}'",
         {"order_by": ["attributes.start_time DESC"], "max_results": 1}),
        ("delete", "old", CHAMPION_TAG), ("set", "new", CHAMPION_TAG, CHAMPION)]
    again = FakeClient(found=[run("new")])  # promoting the champion again removes nothing
    promote(again, "7", "new")
    first = FakeClient()  # no champion yet
    promote(first, "7", "new")
    assert again.calls[1:] == first.calls[1:] == [("set", "new", CHAMPION_TAG, CHAMPION)]


def test_a_label_must_name_exactly_one_sweep_and_a_baseline_run_must_be_a_sweeps_parent():
    assert labelled_sweep(FakeClient(found=[run("p1")]), "3", "night-1") == "p1"
    asked = FakeClient(found=[run("p1")])
    labelled_sweep(asked, "3", "night-1")
    assert asked.calls[0][2] == "tags.`opi.role` = 'sweep' and tags.`opi.label` = 'night-1'"
    for found, count in (([], 0), ([run("p1"), run("p2")], 2)):
        with pytest.raises(RuntimeError, match=f"^expected one sweep run labelled night-1, found {count}$"):
            labelled_sweep(FakeClient(found=found), "3", "night-1")
    client = FakeClient(runs={"parent": run("parent", **{"opi.role": "sweep"}), "child": run("child")})
    sweep_run(client, "parent", "promote")  # no error
    with pytest.raises(CommandError, match=r"^promote child is not a sweep's parent run \(opi.role is None\)$"):
        sweep_run(client, "child", "promote")
    with pytest.raises(CommandError, match="^promote gone is not in this MLflow store: give a sweep's parent run id"):
        sweep_run(client, "gone", "promote")


def test_the_lock_file_is_beside_a_sqlite_store_else_in_the_caches_lock_folder(tmp_path):
    uri = f"sqlite:///{tmp_path}/stores/mlflow.db"
    key = hashlib.sha256(f"{uri}\nopi".encode()).hexdigest()[:16]
    assert lock_file(uri, "opi", "/unused") == tmp_path / "stores" / f"mlflow.db.nightly-{key}.lock"
    assert lock_file(uri, "other", "/unused") != lock_file(uri, "opi", "/unused")  # one lock per experiment
    remote = "http://mlflow:5000"
    remote_key = hashlib.sha256(f"{remote}\nopi".encode()).hexdigest()[:16]
    assert lock_file(remote, "opi", tmp_path / "cache") == tmp_path / "cache" / "locks" / f"nightly-{remote_key}.lock"


def test_a_second_nightly_waits_for_the_promotion_lock_until_the_first_releases_it(tmp_path, caplog):
    remote, cache = "http://mlflow:5000", tmp_path / "cache"
    path = lock_file(remote, "opi", cache)
    entered = threading.Event()

    def second():
        with promotion_lock(remote, "opi", cache):
            entered.set()

    with caplog.at_level(logging.INFO, logger="opi"):
        with promotion_lock(remote, "opi", cache):  # makes the locks folder
            assert path.parent.is_dir()
            with pytest.raises(Timeout):
                FileLock(path).acquire(timeout=0)  # held against any other holder
            waiting = threading.Thread(target=second)
            waiting.start()
            deadline = time.monotonic() + 5
            while "is deciding: waiting for it" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.01)  # the second found the lock held and said it waits
            assert not entered.wait(0.1)  # still the first's
        waiting.join(timeout=5)
    assert entered.is_set() and "another nightly of experiment 'opi' is deciding: waiting for it" in caplog.text
