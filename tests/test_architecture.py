"""docs/architecture.md stays true: each walk from ``conf/`` to the line that uses a setting names steps that exist,
each named by an earlier one (a call, or a task handed to the stage cache), with the counts it states; and every
module of opi/ and flows/ is named in it."""
import ast
import re

import pytest

from tests.helpers.paths import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text()
WALK = re.compile(r"^- `([\w.]+)` \((\d+) hops, (\d+) files\): (.*?)(?=^- |\Z)", re.M | re.S)
STEP = re.compile(r"`([\w/.]+\.(?:py|yaml))`(?:\s+`([\w.]+)`)?")


def walks() -> dict[str, tuple[int, int, list[tuple[str, str | None]]]]:
    section = DOC.split("## Following a setting", 1)[1].split("\n## ", 1)[0]
    return {setting: (int(hops), int(files), STEP.findall(text.split("(the", 1)[0]))
            for setting, hops, files, text in WALK.findall(section)}


def definition(path: str, symbol: str) -> ast.AST:
    """The function, class or table ``symbol`` (``Class.method`` for a method) defined in ``path``."""
    scope: list[ast.AST] = ast.parse((ROOT / path).read_text()).body
    found = None
    for part in symbol.split("."):
        found = next((node for node in scope if named(node) == part), None)
        assert found is not None, f"{path} defines no {symbol}"
        scope = getattr(found, "body", [])
    return found


def named(node: ast.AST) -> str | None:
    """The name a function, a class or a module-level table (``PIPELINE = ...``) defines."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def test_the_three_walks_are_stated():
    assert set(walks()) == {"retriever.k", "chunking.size", "metrics.similarity"}


@pytest.mark.parametrize("setting", ["retriever.k", "chunking.size", "metrics.similarity"])
def test_a_walk_names_steps_that_exist_each_reached_from_an_earlier_one(setting):
    hops, files, steps = walks()[setting]
    assert hops == len(steps) - 1 and files == len({path for path, _ in steps}), (hops, files, steps)
    (option, _), (schema_path, schema), *calls = steps
    assert (ROOT / option).is_file() and option.startswith(f"conf/{setting.split('.')[0]}/")
    assert setting.split(".")[1] in {node.target.id for node in definition(schema_path, schema).body
                                     if isinstance(node, ast.AnnAssign)}  # the schema holds the setting
    named: set[str] = set()
    for number, (path, symbol) in enumerate(calls):
        node = definition(path, symbol)
        if number:
            assert symbol.split(".")[-1] in named, f"{symbol} ({path}) is named by no earlier step of {setting}"
        named |= names_in(node)


def test_every_module_is_named_in_the_module_map():
    modules = [p for folder in ("opi", "flows") for p in (ROOT / folder).rglob("*.py")
               if p.name != "__init__.py" and "__pycache__" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in DOC and f"{p.stem}`" not in DOC
               and f"/{p.name}" not in DOC]
    assert missing == []
