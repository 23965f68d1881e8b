"""Whole results kept under one key: read back, an unreadable one a miss (removed, said), a moved folder still
read, and no Prefect needed for any of it."""
import subprocess
import sys

from flows.orchestration.kept import keep, kept_path, read_kept, recalled
from flows.orchestration.results import Scores
from tests.helpers.paths import ROOT


def test_a_kept_result_reads_back_and_an_unreadable_one_is_a_miss(tmp_path, caplog):
    folder = str(tmp_path / "cache")
    assert read_kept(folder, "configuration-x") is None
    keep(folder, "configuration-x", {"metrics": {"opi_1": 0.5}, "stages": 6})
    assert read_kept(folder, "configuration-x") == {"metrics": {"opi_1": 0.5}, "stages": 6}
    result = kept_path(folder, "configuration-x")
    result.write_bytes(result.read_bytes()[: len(result.read_bytes()) // 2])  # as if cut off by a disk fault
    assert read_kept(folder, "configuration-x") is None
    assert "cached result configuration-x is unreadable" in caplog.text and not result.exists()
    keep(folder, "configuration-x", {"stages": 7})  # the next run's result replaces it
    assert read_kept(folder, "configuration-x") == {"stages": 7}
    assert [p.name for p in result.parent.iterdir()] == ["configuration-x"]  # no temporary file left


def test_another_tools_file_under_the_key_is_a_miss_not_a_traceback(tmp_path, caplog):
    path = kept_path(str(tmp_path), "configuration-y")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not written by OPI")
    assert read_kept(str(tmp_path), "configuration-y") is None and "is unreadable" in caplog.text


def test_a_cache_folder_moved_elsewhere_is_still_read(tmp_path):
    keep(str(tmp_path / "here"), "configuration-x", {"stages": 3})
    (tmp_path / "here").rename(tmp_path / "there")
    assert read_kept(str(tmp_path / "there"), "configuration-x") == {"stages": 3}


def test_a_configurations_result_is_kept_and_read_without_importing_prefect(tmp_path):
    keep(str(tmp_path), "configuration-z", Scores({"bertsim": 0.5}, None, None, {}, 7))
    probe = ("import sys; from flows.orchestration.kept import read_kept; "
             f"kept = read_kept({str(tmp_path)!r}, 'configuration-z'); "
             "print(kept.metrics, kept.stages, any(m.split('.')[0] == 'prefect' for m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert output.stdout.split() == ["{'bertsim':", "0.5}", "7", "False"]


def test_recalled_computes_once_then_reads_back(tmp_path):
    computed = []
    first = recalled(str(tmp_path), "report-x", lambda: computed.append(1) or {"rank": [2, 1]})
    again = recalled(str(tmp_path), "report-x", lambda: computed.append(1) or {"rank": "not this"})
    assert first == ({"rank": [2, 1]}, False) and again == ({"rank": [2, 1]}, True) and computed == [1]
