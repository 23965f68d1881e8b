"""Importing ``flows`` changes nothing in the process (commands set their environment up when they start), and no
private interface of Hydra or Prefect is used outside the one adapter module."""
import ast
import json
import re
import subprocess
import sys

from tests.helpers.paths import ROOT

SOURCES = sorted(p for folder in ("flows", "opi") for p in (ROOT / folder).rglob("*.py"))
OURS = ("flows", "opi", "hydra_plugins")
PROBE = """
import importlib, json, logging, os, pkgutil, sys, warnings
from pathlib import Path

def children():
    me = str(os.getpid())
    return sorted(p.name for p in Path("/proc").iterdir() if p.name.isdigit()
                  and (p / "stat").read_text().rsplit(")", 1)[1].split()[1] == me)

def state():
    return {"environ": dict(os.environ), "warnings": [repr(f) for f in warnings.filters],
            "log_factory": repr(logging.getLogRecordFactory()), "children": children()}

for name in json.loads(sys.argv[1]):  # the third-party modules flows and opi import: what they change is theirs
    importlib.import_module(name)
before = state()
import flows
names = [m.name for m in pkgutil.walk_packages(flows.__path__, "flows.")]
for name in names:
    importlib.import_module(name)
after = state()
print(json.dumps({"modules": len(names), "before": before, "after": after}))
"""


def third_party_imports() -> list[str]:
    """What the modules of flows and opi import from other packages when they are imported (module level)."""
    found = set()
    for path in SOURCES:
        for node in ast.parse(path.read_text()).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            found.update(n for n in names if n.split(".")[0] not in OURS and n.split(".")[0] not in
                         sys.stdlib_module_names)
    return sorted(found)


def test_importing_every_flows_module_changes_nothing_and_starts_nothing():
    imports = third_party_imports()
    assert "prefect" in imports and "mlflow" in imports and "hydra" in imports
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(imports)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600, env={k: v for k, v in __import__("os").environ.items()
                                                        if not k.startswith(("OPI_", "PREFECT_API"))})
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["modules"] >= 40  # every module of flows/ was imported
    before, after = probe["before"], probe["after"]
    changed = {k for k in {*before["environ"], *after["environ"]} if before["environ"].get(k) != after["environ"].get(k)}
    assert changed == set(), changed
    assert after["warnings"] == before["warnings"]
    assert after["log_factory"] == before["log_factory"]
    assert after["children"] == before["children"]


PRIVATE = [re.compile(r"hydra\._internal"), re.compile(r"PREFECT__"), re.compile(r"prefect[\w.]*\._[a-z]")]
ADAPTER = ROOT / "flows" / "orchestration" / "prefect_adapter.py"


def test_no_private_hydra_or_prefect_interface_outside_the_adapter():
    sources = [p for folder in ("opi", "flows", "hydra_plugins", "tests") for p in (ROOT / folder).rglob("*.py")
               if p != ADAPTER and p != __import__("pathlib").Path(__file__)]
    found = [f"{p.relative_to(ROOT)}:{number}: {line.strip()}" for p in sources
             for number, line in enumerate(p.read_text().splitlines(), start=1)
             if any(pattern.search(line) for pattern in PRIVATE)]
    assert found == []


# flows' packages, lowest first: each imports only from those below it (function-local imports included)
LAYERS = [{"orchestration"}, {"base"}, {"tracking"}, {"run"}, {"human", "nightly", "training"}, {"cli"}]
ALIASES = {"evaluate", "report", "label", "annotate", "train_classifier"}  # forwarding modules: python -m flows.x


def flows_imports() -> set[tuple[str, str, str]]:
    """(importing package, imported package, file) for every import of one flows package by another."""
    found = set()
    for path in (ROOT / "flows").rglob("*.py"):
        parts = path.relative_to(ROOT / "flows").parts
        package = parts[0] if len(parts) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for module in modules:
                if module.startswith("flows.") and module.split(".")[1] != package:
                    found.add((package, module.split(".")[1], str(path.relative_to(ROOT))))
    return found


def test_flows_packages_import_one_way_only():
    level = {package: number for number, layer in enumerate(LAYERS) for package in layer}
    level.update(dict.fromkeys(ALIASES, len(LAYERS)))
    packages = {p.name for p in (ROOT / "flows").iterdir() if (p / "__init__.py").exists()}
    assert packages == set().union(*LAYERS)  # a new package takes its place in LAYERS
    upward = sorted(f"{file}: {source} imports {target}" for source, target, file in flows_imports()
                    if level[target] >= level[source])
    assert upward == []


def test_opi_imports_nothing_of_flows_prefect_or_mlflow():
    found = []
    for path in (ROOT / "opi").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            found += [f"{path.relative_to(ROOT)}: {m}" for m in modules
                      if m.split(".")[0] in ("flows", "prefect", "mlflow")]
    assert found == []
