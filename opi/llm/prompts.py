"""Prompts live in files beside this module; each has a version (a hash of its text) that enters the call cache key,
so editing a prompt never returns answers cached for the old wording."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Prompt:
    name: str
    template: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:12]

    def render(self, **fields: str) -> str:
        return self.template.format(**fields)


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = resources.files("opi.llm") / "prompts" / f"{name}.txt"
    if not path.is_file():
        raise ValueError(f"no prompt named {name!r} in opi/llm/prompts/")
    return Prompt(name, path.read_text(encoding="utf-8"))
