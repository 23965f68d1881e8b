"""What a process keeps between configurations (``opi.memory``): made once per key, each kind bounded with the
oldest forgotten first, said-once keys, and every kept thing of OPI named in ``BOUNDS``."""
import ast

from opi.memory import BOUNDS, Memory
from tests.helpers.paths import ROOT


def test_a_value_is_made_once_and_the_oldest_is_forgotten_past_the_bound():
    memory, made = Memory({"models": 2}), []

    def make(name):
        return lambda: made.append(name) or name.upper()

    assert memory.recall("models", "a", make("a")) == "A"
    assert memory.recall("models", "a", make("a")) == "A" and made == ["a"]
    memory.recall("models", "b", make("b"))
    memory.recall("models", "a", make("a"))  # used again: now the newest
    memory.recall("models", "c", make("c"))  # past the bound of 2: b, the oldest, goes
    assert made == ["a", "b", "c"] and memory.holds("models", "a") and not memory.holds("models", "b")
    assert memory.values("models") == ["A", "C"] and memory.sizes() == {"models": 2}


def test_an_isolated_kind_starts_empty_and_gets_back_what_it_held():
    memory = Memory({"models": 2})
    memory.recall("models", "a", lambda: "A")
    with memory.isolated("models"):
        assert not memory.holds("models", "a")
        memory.recall("models", "stand-in", lambda: "S")
    assert memory.values("models") == ["A"]


def test_get_reads_what_is_kept_and_neither_makes_nor_keeps_anything():
    memory = Memory({"things": 2})
    assert memory.get("things", "a") is None and not memory.holds("things", "a")
    memory.recall("things", "a", lambda: 1)
    memory.recall("things", "b", lambda: 2)
    assert memory.get("things", "a") == 1
    memory.recall("things", "c", lambda: 3)  # "a" is still the oldest: get did not make it the newest
    assert memory.get("things", "a") is None and memory.get("things", "b") == 2


def test_first_time_is_true_once_per_key_until_forgotten():
    memory = Memory({"said": 10})
    assert [memory.first_time("said", m) for m in ("x", "x", "y")] == [True, False, True]
    memory.forget("said")
    assert memory.first_time("said", "x")


def empty_container(value: ast.AST | None) -> bool:
    """``{}``, ``set()``, ``dict()``: a module-level container that starts empty and grows."""
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("set", "dict") and not value.args


def test_no_module_of_opi_or_flows_keeps_a_cache_of_its_own():
    """Module-level containers that grow are process memory: they live in opi.memory, named and bounded. The
    process state that is not a cache (a signal received, the temporary server, the sweep's folder, the keys read,
    the requests being asked of an endpoint and its slots for them) is listed."""
    state = {"flows/tracking/traces.py:_CONFIGURED", "flows/base/store_checks.py:_SWEEP_FOLDER",
             "flows/base/store_checks.py:PLACES", "flows/base/progress.py:_SWEEP",
             "opi/llm/client.py:_ASKING", "opi/llm/client.py:_IN_FLIGHT", "opi/secrets.py:_KEYS_IN_USE"}
    found = set()
    for path in [*(ROOT / "opi").rglob("*.py"), *(ROOT / "flows").rglob("*.py")]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and empty_container(node.value):
                found |= {f"{path.relative_to(ROOT)}:{t.id}" for t in node.targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.AnnAssign) and empty_container(node.value):
                found.add(f"{path.relative_to(ROOT)}:{node.target.id}")
    assert found == state and set(BOUNDS) >= {"chunked articles", "fitted classifiers", "embedders", "said"}
