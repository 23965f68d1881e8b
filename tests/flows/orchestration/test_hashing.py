"""Content hashes without Prefect: the same values as Prefect's ``hash_objects`` (so keys made by OPI and by
Prefect's cache policies agree, and caches of earlier versions stay valid), and a clear refusal of what cannot be
hashed."""
import threading
from dataclasses import dataclass

import pytest
from prefect.utilities.hashing import hash_objects

from flows.orchestration.hashing import content_hash, hashed
from opi.data import Example
from opi.report import ReportSettings
from opi.schemas import ReportConfig


class Component:  # a user's own component that is not a dataclass: keyed by its pickle, as Prefect does
    def __init__(self, k: int):
        self.k = k


@dataclass
class Nested:
    name: str
    values: tuple


CASES = [
    ("one string",),
    ({"b": [1, 2.5, None, True], "a": {"z": "x", "y": ("t", 3)}}, "code-abc", None),
    ([Example("e1", "An article.", "A question?", "An answer.", "direct_matching")],),
    (ReportSettings(ReportConfig(), 2.0, fixed=(("llm", "extractive"),)), ["direct_matching", "deductive"]),
    (Nested("n", (1, "two", [3.0])), 0.1 + 0.2, -0.0, 10**20, "ünïcödé"),
    ({"classifier": Component(3)}, "seed"),
]


@pytest.mark.parametrize("objects", CASES)
def test_the_hash_is_prefects_for_plain_data(objects):
    assert content_hash(*objects) == hash_objects(*objects, raise_on_failure=True)


def test_a_hashed_input_follows_its_content():
    assert hashed(["a", "b"]).content_hash == content_hash(["a", "b"]) != hashed(["a", "c"]).content_hash
    assert hashed({"k": 1}).content_hash == content_hash({"k": 1})
    assert hashed(["a"], "known").content_hash == "known"


def test_what_can_be_neither_json_nor_pickled_is_refused_clearly():
    with pytest.raises(TypeError, match="cannot key the cache on .*neither JSON nor picklable"):
        content_hash({"lock": threading.Lock()})
