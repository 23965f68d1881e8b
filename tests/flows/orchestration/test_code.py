"""Cache keys follow the code that produced the result: a stage's key covers the modules it runs and what they
import inside opi (and a user's own component's package), not every file of opi."""
import json
import os
import sys
import textwrap

import pytest

from flows.orchestration import code, tasks
from opi.retrievers import BM25Retriever, KNNRetriever, SVMRetriever


def test_a_stage_depends_on_the_modules_it_runs_and_their_imports_only():
    ranking = code.closure("opi.retrieval") | code.closure("opi.retrievers.lexical")
    assert {"opi.retrieval", "opi.retrievers.base", "opi.retrievers.lexical", "opi.chunking", "opi.combine"} <= ranking
    assert "opi.report" not in ranking and "opi.metrics.stats" not in ranking
    assert "opi.report" in code.closure("opi.report") and "opi.metrics.stats" in code.closure("opi.report")


def test_function_local_and_relative_imports_count(tmp_path, monkeypatch):
    package = tmp_path / "mine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text("def f():\n    from . import helper\n    import opi.secrets\n")
    (package / "helper.py").write_text("X = 1\n")
    (package / "unused.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = code.closure("mine.main")
    assert {"mine", "mine.main", "mine.helper", "opi.secrets"} <= found and "mine.unused" not in found


def edited(monkeypatch, name: str):
    """Make the source of files called ``name`` read as edited (a docstring changed), without touching them."""
    real = code.source
    monkeypatch.setattr(code, "source", lambda path: real(path) + (b"\n# edited" if path.name == name else b""))


def test_an_edit_elsewhere_keeps_the_ranking_key_and_an_edit_in_a_used_module_changes_it(monkeypatch):
    before, report = tasks.rank.code({"retriever": BM25Retriever()}), tasks.sweep_report.code()
    edited(monkeypatch, "report.py")
    assert tasks.rank.code({"retriever": BM25Retriever()}) == before  # rankings keep their cache
    assert tasks.sweep_report.code() != report  # the report is built again
    monkeypatch.undo()
    edited(monkeypatch, "lexical.py")
    assert tasks.rank.code({"retriever": BM25Retriever()}) != before  # the retriever's own module
    assert tasks.rank.code({"retriever": KNNRetriever()}) == tasks.rank.code({"retriever": KNNRetriever()})
    monkeypatch.undo()
    edited(monkeypatch, "retrieval.py")
    assert tasks.rank.code({"retriever": BM25Retriever()}) != before  # the stage's own module


STAGES = {"chunk": lambda: tasks.chunk_articles.code(), "rank BM25": lambda: tasks.rank.code({"retriever": BM25Retriever()}),
          "rank kNN": lambda: tasks.rank.code({"retriever": KNNRetriever()}), "rank SVM": lambda: tasks.rank.code({"retriever": SVMRetriever()}),
          "report": lambda: tasks.sweep_report.code()}


@pytest.mark.parametrize("edit, recomputed", [
    ("lexical.py", {"rank BM25"}),  # one retriever's module: its rankings only
    ("dense.py", {"rank kNN"}),
    ("svm.py", {"rank SVM"}),
    ("local.py", {"rank kNN", "rank SVM"}),  # the local embedding model's code: the retrievers that embed
    ("data.py", {"report"}),  # the stages import it for type hints only
    ("render.py", {"report"}),
    ("chunking.py", {"chunk", "rank BM25", "rank kNN", "rank SVM", "report"}),
    ("schemas.py", {"rank kNN", "rank SVM", "report"}),  # a default changed: not the lexical rankings (opi.checks)
    ("checks.py", {"rank BM25", "rank kNN", "rank SVM", "report"}),  # the range check every component runs
])
def test_which_stages_an_edit_recomputes(monkeypatch, edit, recomputed):
    before = {stage: key() for stage, key in STAGES.items()}
    edited(monkeypatch, edit)
    assert {stage for stage, key in STAGES.items() if key() != before[stage]} == recomputed


def test_imports_for_type_hints_only_are_not_dependencies(tmp_path, monkeypatch):
    package = tmp_path / "hinted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import heavy\n"
                                     "else:\n    from . import light\n")
    (package / "heavy.py").write_text("")
    (package / "light.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = code.closure("hinted.main")
    assert "hinted.light" in found and "hinted.heavy" not in found


def test_a_component_of_your_own_is_keyed_on_its_source(tmp_path, monkeypatch):
    module = tmp_path / "my_retriever.py"
    module.write_text(textwrap.dedent("""
        from dataclasses import dataclass
        from opi.retrievers.base import Retriever

        @dataclass
        class Mine(Retriever):
            def score(self, questions, chunks):
                return [[1.0] * len(chunks) for _ in questions]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from my_retriever import Mine

    before = tasks.rank.code({"retriever": Mine()})
    module.write_text(module.read_text().replace("1.0", "2.0"))  # the user edits their retriever
    os.utime(module, ns=(1, 1))  # a new stamp, as any edit gives (the same second could keep the old one)
    assert tasks.rank.code({"retriever": Mine()}) != before
    sys.modules.pop("my_retriever", None)


@pytest.mark.parametrize("stage", tasks.STAGES, ids=lambda stage: stage.name)
def test_every_stage_names_the_modules_it_calls(stage):
    assert stage.uses and all(code.module_file(module) is not None for module in stage.uses)


@pytest.fixture
def fresh_process(monkeypatch):
    """``code`` as a new process meets it: nothing remembered yet; returns a function that forgets again."""
    def forget():
        monkeypatch.setattr(code, "_IMPORTS", {"folder": None, "entries": {}, "changed": False})
        code.closure.cache_clear()
    forget()
    yield forget
    code.closure.cache_clear()


def test_a_new_process_reads_what_modules_import_from_the_folder_and_parses_only_edited_ones(
        tmp_path, monkeypatch, fresh_process):
    package = tmp_path / "src" / "kept"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text("from . import helper\n")
    (package / "helper.py").write_text("")
    (package / "later.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    code.remember_imports(tmp_path / "cache")
    first = code.code_version("kept.main")
    assert (tmp_path / "cache" / code.IMPORTS_FILE).is_file()

    fresh_process()
    parsed = []
    real = code.parsed_imports
    monkeypatch.setattr(code, "parsed_imports", lambda name, path: parsed.append(name) or real(name, path))
    code.remember_imports(tmp_path / "cache")
    assert code.code_version("kept.main") == first and parsed == []  # every module's imports read, none parsed

    fresh_process()
    (package / "main.py").write_text("from . import helper, later\n")
    os.utime(package / "main.py", ns=(1, 1))
    code.remember_imports(tmp_path / "cache")
    assert "kept.later" in code.closure("kept.main")
    assert sorted(parsed) == ["kept.later", "kept.main"]  # the edited module, and the one it now imports


def test_remembered_imports_of_another_reader_or_a_damaged_file_are_not_used(tmp_path, monkeypatch, fresh_process):
    cache = tmp_path / "cache"
    cache.mkdir()
    path = code.module_file("opi.secrets")
    status = path.stat()
    wrong = {f"opi.secrets {path}": [status.st_mtime_ns, status.st_size, ["opi.report"]]}
    (cache / code.IMPORTS_FILE).write_text(json.dumps({"reader": "another", "entries": wrong}))
    code.remember_imports(cache)
    assert "opi.report" not in code.closure("opi.secrets")

    fresh_process()
    (cache / code.IMPORTS_FILE).write_text("{not json")
    code.remember_imports(cache)
    assert "opi.secrets" in code.closure("opi.secrets") and "opi.report" not in code.closure("opi.secrets")
