"""Which source code a cached result depends on: the modules a stage runs and everything they import inside
``opi`` (or inside the top-level package of a user's own component), found by reading their import statements
(function-local imports included; imports for type hints only, under ``if TYPE_CHECKING:``, left out), hashed by
content.

An edit in a module a stage does not use (``opi/report.py`` for rankings) keeps its results; an edit in one it uses
(the retriever's module, ``opi/retrieval.py``) computes them again. A component of your own outside ``opi``
(``retriever._target_=my_pkg.MyRetriever``) is keyed on its module's source too.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from flows.orchestration.files import write_atomically

LIBRARY = "opi"
IMPORTS_FILE = "code-imports.json"  # what each module imports, by its file's stamp (``remember_imports``)
_IMPORTS: dict[str, Any] = {"folder": None, "entries": {}, "changed": False}
_IMPORTS_LOCK = threading.Lock()  # stages key their results from several threads
_PARSE_LOCK = threading.Lock()


def module_of(thing: Any) -> str:
    """The module a class, function, instance or module name comes from."""
    if isinstance(thing, str):
        return thing
    if inspect.ismodule(thing):
        return thing.__name__
    return (thing if inspect.isclass(thing) or inspect.isfunction(thing) else type(thing)).__module__


@lru_cache(maxsize=None)
def module_file(name: str) -> Path | None:
    """The source file of module ``name`` (a package's ``__init__.py``), or None for a built-in, compiled or
    missing one. Found on disk below its top-level package, without importing it: asking the import system about
    ``opi.x.y`` would import ``opi.x`` (and scikit-learn with ``opi.relation_features``)."""
    root, *parts = name.split(".")
    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not parts:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for folder in spec.submodule_search_locations or ():
        candidate = Path(folder).joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return path
    return None


def imported_modules(name: str, path: Path) -> set[str]:
    """Every module that ``import`` statements anywhere in ``path`` (module ``name``) name: ``from a.b import c``
    gives ``a.b`` and, where it is a module, ``a.b.c``; relative imports are resolved. Remembered by the file's
    stamp (in this process, and across processes where ``remember_imports`` names a folder)."""
    key, stamp = f"{name} {path}", list(_stamp(path))
    entry = _IMPORTS["entries"].get(key)
    if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp:
        return set(entry[2])
    found = parsed_imports(name, path)
    with _IMPORTS_LOCK:
        _IMPORTS["entries"][key] = [*stamp, sorted(found)]
        _IMPORTS["changed"] = True
    return found


def parsed_imports(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    with _PARSE_LOCK:  # CPython 3.11's ast.parse is not thread-safe ("AST constructor recursion depth mismatch")
        tree = ast.parse(source(path), str(path))
    for node in executed_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module}


def remember_imports(folder: str | Path) -> None:
    """Read and keep what modules import in ``folder``: a command then parses only the modules changed since
    (parsing every module a result depends on costs ~0.4 s, which a cached configuration would wait for). The
    file is ignored when this module's own source changes (the way imports are read may have)."""
    folder = Path(folder)
    if _IMPORTS["folder"] == folder:
        return
    _IMPORTS["folder"] = folder
    try:
        kept = json.loads((folder / IMPORTS_FILE).read_text())
    except (OSError, ValueError):
        return
    if isinstance(kept, dict) and kept.get("reader") == _reader() and isinstance(kept.get("entries"), dict):
        with _IMPORTS_LOCK:
            _IMPORTS["entries"] = {**kept["entries"], **_IMPORTS["entries"]}


def _save_imports() -> None:
    with _IMPORTS_LOCK:  # one writer at a time in this process; other processes write under their own names
        folder, changed = _IMPORTS["folder"], _IMPORTS["changed"]
        if folder is None or not changed:
            return
        _IMPORTS["changed"] = False
        text = json.dumps({"reader": _reader(), "entries": _IMPORTS["entries"]})
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomically(folder / IMPORTS_FILE, lambda path: path.write_text(text))
        except OSError:  # a read-only cache keeps nothing, and costs only the parsing
            pass


def _reader() -> str:
    return hashlib.sha256(source(Path(__file__))).hexdigest()[:16]


def executed_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node of ``tree`` but the bodies of ``if TYPE_CHECKING:`` blocks: imports for type hints only run no
    code, so they do not make a result depend on a module."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@lru_cache(maxsize=None)
def closure(name: str) -> frozenset[str]:
    """``name`` and the modules it imports, directly or not, inside ``opi`` and inside ``name``'s own top-level
    package."""
    roots = {LIBRARY, name.split(".")[0]}
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        path = module_file(current)
        if current in seen or path is None:
            continue
        seen.add(current)
        for module in imported_modules(current, path):
            parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)]
            todo.extend(m for m in parents if m.split(".")[0] in roots and m not in seen)
    return frozenset(seen)


def source(path: Path) -> bytes:
    return _source(str(path), *_stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_mtime_ns, status.st_size


@lru_cache(maxsize=1024)
def _source(path: str, mtime_ns: int, size: int) -> bytes:  # read again whenever the file changes
    return Path(path).read_bytes()


def code_version(*things: Any, files: Iterable[Path] = ()) -> str:
    """Hash of the source of ``things`` (modules, classes, functions, component instances) with everything they
    import inside ``opi`` and their own package, and of ``files``."""
    modules = sorted({m for thing in things for m in closure(module_of(thing))})
    _save_imports()
    digest = hashlib.sha256()
    for module in modules:
        digest.update(module.encode() + b"\0" + source(module_file(module)) + b"\0")
    for path in sorted(set(files)):
        digest.update(str(path.name).encode() + b"\0" + source(path) + b"\0")
    return digest.hexdigest()[:16]
