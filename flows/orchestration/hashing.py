"""Content hashes for cache keys, without importing Prefect (a command whose result is kept whole needs no
orchestration, and importing any Prefect module costs ~1 s).

``content_hash`` gives the value Prefect's ``hash_objects`` gives (JSON with sorted keys, MD5; a dataclass as
Prefect's JSON encoder writes it; what JSON cannot hold, such as a user's own component class that is not a
dataclass, by its cloudpickle, as Prefect falls back to), so keys made here agree with those of earlier versions; a
test compares the two.

- ``hashed``: a big input many task calls receive (the examples, the article texts, the chunked articles), marked
  with its content hash, taken once instead of at every call.
- ``key_of``: any task input as plain data for a key: hashed inputs by their hash, components and configs by their
  class and settings (run-time resources left out, and the settings a component says its result does not depend
  on: a retriever's ``k`` is applied after ranking).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import cloudpickle

from opi.components import RESOURCES, target_of


def _encoded(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__class__": f"{type(value).__module__}.{type(value).__qualname__}", "data": dataclasses.asdict(value)}
    raise TypeError(f"{type(value).__name__} is not JSON")


def content_hash(*objects: Any) -> str:
    """The hash of ``objects``: plain data (JSON types, tuples, dataclasses of them) by its JSON, else by its
    cloudpickle."""
    try:
        content = json.dumps((objects, {}), sort_keys=True, default=_encoded).encode()
    except (TypeError, ValueError):
        try:
            content = cloudpickle.dumps((objects, {}))
        except Exception as err:
            raise TypeError(f"cannot key the cache on {objects!r:.200}: neither JSON nor picklable ({err})") from err
    return hashlib.md5(content, usedforsecurity=False).hexdigest()


class HashedList(list):
    """A list marked with the hash of its content (``hashed``)."""

    content_hash: str


class HashedDict(dict):
    """A dict marked with the hash of its content (``hashed``)."""

    content_hash: str


def hashed(value: list | dict, known_hash: str | None = None) -> HashedList | HashedDict:
    """``value`` marked with its content hash (``known_hash`` when the caller knows it from what it was made of)."""
    marked = HashedDict(value) if isinstance(value, dict) else HashedList(value)
    marked.content_hash = known_hash or plain_hash(marked)
    return marked


def plain_hash(value: list | dict) -> str:
    return content_hash(dict(value) if isinstance(value, dict) else list(value))


def key_of(value: Any) -> Any:
    """``value`` as plain data for a cache key. A runner that rebuilds values on the way (Dask copies collections)
    loses the hash attribute: it is then taken again, so keys agree."""
    if isinstance(value, (HashedList, HashedDict)):
        return ("content-hash", getattr(value, "content_hash", None) or plain_hash(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        neutral = (*RESOURCES, *getattr(type(value), "excluded_from_keys", ()))
        return {"_target_": target_of(type(value)),
                **{f.name: key_of(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in neutral}}
    if isinstance(value, dict):
        return {k: key_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [key_of(v) for v in value]
    return value
