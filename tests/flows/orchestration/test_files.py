"""Files written whole or not at all (``flows.orchestration.files``)."""
import os
import threading
from pathlib import Path

import pytest

from flows.orchestration.files import write_atomically


def test_a_file_is_written_under_a_partial_name_then_renamed(tmp_path):
    seen = []

    def write(path: Path):
        seen.append(path)
        path.write_text("whole")
        assert not (tmp_path / "metrics.json").exists()  # nothing under the final name while writing

    write_atomically(tmp_path / "metrics.json", write)
    (partial,) = seen
    assert partial.parent == tmp_path and partial.name == f".metrics.json.{os.getpid()}-{threading.get_ident()}.partial"
    assert (tmp_path / "metrics.json").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # the partial file was renamed


def test_a_write_that_fails_leaves_the_previous_file_whole(tmp_path):
    (tmp_path / "metrics.json").write_text("previous")

    def killed(path: Path):
        path.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "metrics.json", killed)
    assert (tmp_path / "metrics.json").read_text() == "previous"
    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "new.csv", killed)
    assert not (tmp_path / "new.csv").exists()  # no half file under a final name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # nor under a temporary one


def test_a_file_is_replaced_whole(tmp_path):
    (tmp_path / "a.txt").write_text("old, longer content")
    write_atomically(tmp_path / "a.txt", lambda path: path.write_text("new"))
    assert (tmp_path / "a.txt").read_text() == "new"
