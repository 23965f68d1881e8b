"""A stage declared once. ``@stage(...)`` on the function that does a stage's work states its name, the group its
time and computed calls are counted under, the ``opi`` modules its cache key covers (with the modules of the
components it is given, and the embedding code where it embeds), and whether a call's result is kept in the stage
cache. ``StageCalls`` (``flows.orchestration.cache``) reads all of that from the declaration: a call site passes
only the stage's inputs.

A stage's Prefect task (``Stage.task``) runs the function with its work measured (``flows.orchestration.work``); it
takes two keywords besides the function's parameters: ``code``, the hash of the source the result depends on (part
of the cache key), and ``embedding_store``, where vectors are kept (left out of the key).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from flows.orchestration.code import code_version
from flows.orchestration.work import measuring

if TYPE_CHECKING:
    from prefect import Task

Arguments = Mapping[str, Any]  # a call's arguments by parameter name


def never(arguments: Arguments) -> bool:
    return False


def nothing(arguments: Arguments) -> tuple:
    return ()


@dataclass(frozen=True)
class Stage:
    """``fn``: the stage's work. ``counted_as``: the group of ``seconds_*`` and ``computed_*`` it adds to.
    ``uses``: the ``opi`` modules it calls; ``embeds``: whether a call embeds (then the embedding code counts too);
    ``components``: the components a call builds (their classes' modules count); ``kept``: whether a call's result
    is kept in the stage cache (not when every LLM reply is kept call by call in the LLM call cache, which alone
    knows which replies were no answer and must be asked again)."""

    fn: Callable
    name: str
    counted_as: str
    uses: tuple[str, ...]
    embeds: Callable[[Arguments], bool] = never
    components: Callable[[Arguments], tuple] = nothing
    kept: Callable[[Arguments], bool] = lambda arguments: True

    def arguments(self, args: tuple, kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        bound = inspect.signature(self.fn).bind(*args, **(kwargs or {}))
        bound.apply_defaults()
        return dict(bound.arguments)

    def modules(self, arguments: Arguments) -> tuple[str, ...]:
        return (*self.uses, *(("opi.embeddings",) if self.embeds(arguments) else ()))

    def code(self, arguments: Arguments | None = None) -> str:
        """The ``code`` of a call with ``arguments``: the modules it runs, its components' and the stage's file."""
        arguments = arguments or {}
        return code_version(*self.modules(arguments), *self.components(arguments),
                            files=[Path(inspect.getfile(self.fn))])

    @functools.cached_property
    def task(self) -> Task:
        """The stage as a Prefect task (uncached: ``flows.orchestration.cache.cached`` adds the cache). Its source,
        and so its cache key, is ``fn``'s."""
        from prefect import task  # here: declaring stages (a kept result's key lists their modules) needs no Prefect

        return task(measuring(self.fn), name=self.name)


def stage(name: str, counted_as: str, uses: tuple[str, ...], embeds: bool | Callable[[Arguments], bool] = False,
          components: Callable[[Arguments], tuple] = nothing, kept: bool | Callable[[Arguments], bool] = True
          ) -> Callable[[Callable], Stage]:
    """Declare the decorated function a stage (``Stage``); ``embeds`` and ``kept`` may be fixed or decided per
    call from its arguments."""
    def declared(fn: Callable) -> Stage:
        return Stage(fn, name, counted_as, uses, embeds if callable(embeds) else (lambda arguments: embeds),
                     components, kept if callable(kept) else (lambda arguments: kept))
    return declared
