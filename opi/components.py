"""Components (retrievers, combinations, readers, relation classifiers) are dataclasses, built from config by
``_target_`` with Hydra's ``instantiate``.

A component's dataclass fields are its settings, with their one default; its ``__post_init__`` checks their
ranges. ``component_schema`` turns such a class into the structured config Hydra composes against (the same
fields and defaults, plus ``_target_``), so a misspelt or ill-typed setting fails while composing and no default is
written twice. What a component needs at run time but is not a setting (the embedder, an LLM client, the label
set) is a *resource*: ``build`` passes the ones the class accepts.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from typing import Any, Callable

from omegaconf import MISSING

from opi.schemas import EmbeddingConfig, check_override

# Run-time objects handed to components, never part of their config.
RESOURCES = ("embedder", "client", "relation_set", "seed", "pipeline")


def target_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def component_schema(cls: type) -> type:
    """The structured config of a dataclass component: ``_target_`` plus every init field that is not a resource."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{target_of(cls)} is not a dataclass: components declare their settings as fields")
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, Any, Any]] = [("_target_", str, dataclasses.field(default=target_of(cls)))]
    for f in dataclasses.fields(cls):
        if not f.init or f.name in RESOURCES:
            continue
        if f.default is not dataclasses.MISSING:
            default = dataclasses.field(default=f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = dataclasses.field(default_factory=f.default_factory)
        else:
            default = dataclasses.field(default=MISSING)
        fields.append((f.name, hints[f.name], default))
    return dataclasses.make_dataclass(f"{cls.__name__}Config", fields)


def accepted(cls: Any, names: typing.Iterable[str]) -> set[str]:
    """The names among ``names`` that ``cls(...)`` takes as keywords."""
    parameters = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return set(names)
    return {name for name in names if name in parameters}


def one_line(err: BaseException | str) -> str:
    """An error's message on one line (a console line says it all; Python's and Hydra's messages span several)."""
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip())


def imported(target: str) -> Any:
    """What the import path ``target`` names (``my_pkg.MyRetriever``); a ValueError in one line when it cannot be
    imported: no such module, no such name in it, or its module failing to import (a missing dependency)."""
    parts = str(target).split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ValueError(f"cannot import {target!r} (_target_): give the import path of a class, such as "
                         "my_pkg.MyRetriever")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name and (module == err.name or module.startswith(f"{err.name}.")):
                continue  # no module of that name: the path's last part(s) are names in a shorter module
            raise ValueError(f"cannot import {target!r} (_target_): importing {module} failed: "
                             f"{one_line(err)}") from None
        except Exception as err:  # noqa: BLE001 - whatever a user's module raises while it is imported
            raise ValueError(f"cannot import {target!r} (_target_): importing {module} failed: "
                             f"{type(err).__name__}: {one_line(err)}") from None
        for depth, name in enumerate(parts[cut:], start=cut):
            if not hasattr(found, name):
                raise ValueError(f"cannot import {target!r} (_target_): {'.'.join(parts[:depth])} has no "
                                 f"{name!r}")
            found = getattr(found, name)
        return found
    raise ValueError(f"cannot import {target!r} (_target_): no module named {parts[0]!r} (is it installed, or on "
                     "PYTHONPATH?)")


def target_of_config(config: Any) -> str:
    return config["_target_"] if isinstance(config, dict) else config._target_


def build(config: Any, **resources: Any) -> Any:
    """``config``'s ``_target_`` called with its settings and the resources its signature accepts."""
    from hydra.utils import instantiate

    cls = imported(target_of_config(config))
    wanted = accepted(cls, resources)
    try:
        component = instantiate(config, _convert_="all", **{name: resources[name] for name in wanted})
        check_override(EmbeddingConfig, getattr(component, "embedding", None))  # its own embedding's ranges
        return component
    except Exception as err:
        cause = err.__cause__ or err  # Hydra wraps the component's own error; the user needs that one
        raise ValueError(f"{getattr(cls, '__name__', cls)}: {one_line(cause)}") from None


def check(config: Any, where: str, kind: Callable[[Any], str | None] | None = None) -> Any:
    """The component ``config`` describes, built without resources (so its class checks its settings); a problem
    names ``where``. ``kind``: what the run needs of the class, checked first (a problem, or None)."""
    problem = None
    try:
        if kind is not None:
            problem = kind(imported(target_of_config(config)))
        if not problem:
            return build(config)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    raise ValueError(f"{where}._target_={target_of_config(config)} {problem}")


def with_resources(component: Any, **resources: Any) -> Any:
    """A copy of a built component given the run-time resources its class accepts."""
    wanted = {name: resources[name] for name in accepted(type(component), resources)}
    if dataclasses.is_dataclass(component):
        return dataclasses.replace(component, **wanted)
    import copy

    copied = copy.copy(component)
    for name, value in wanted.items():
        setattr(copied, name, value)
    return copied
