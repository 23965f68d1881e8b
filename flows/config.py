"""From Hydra's composed config to the typed ``OPIConfig`` that travels into the code.

- ``register_configs``: the group schemas (``opi.schemas``) and, for every component YAML under ``conf/`` that
  names a dataclass by ``_target_``, the schema derived from that class (``opi.components.component_schema``).
  Adding a built-in retriever is therefore one module and one YAML.
- ``typed``: range checks, components built (without resources) so they check their own settings, and the
  cross-group rules; a problem raises ``ValueError`` with the key in its message.
- ``describe``: what a configuration is (display name, kind, setup, members) as fields, never parsed from a name.
- ``effective_settings``: the settings a configuration's results depend on, as plain data, for MLflow params and
  cache keys: the combination's members' settings, not the unused ``retriever`` node, and the other way round.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from opi import components
from opi.schemas import (ChunkingConfig, DatasetConfig, EmbeddingConfig, LLMConfig, MetricsConfig, OPIConfig,
                         OrchestrationConfig, RelationsConfig, ReportConfig, TrackingConfig, TrainConfig)

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
GROUP_SCHEMAS = {"dataset": DatasetConfig, "relations": RelationsConfig, "chunking": ChunkingConfig,
                 "embedding": EmbeddingConfig, "llm": LLMConfig, "metrics": MetricsConfig, "tracking": TrackingConfig,
                 "report": ReportConfig, "orchestration": OrchestrationConfig, "train": TrainConfig}
# component groups: where in each YAML the component sits ("" = the whole file; the llm files hold a reader)
COMPONENT_GROUPS = {"retriever": "", "combination": "", "classifier": "", "llm": "reader"}
_REGISTERED: list[bool] = []


def register_configs(conf_dir: str = CONF_DIR) -> None:
    """Store every schema in Hydra's ConfigStore under ``schema/...`` (each option's defaults list pulls its own
    ``/schema/<group>[/<option>]@...``, so that ``retriever=glob(*)`` sweeps real options only)."""
    from hydra.core.config_store import ConfigStore

    if _REGISTERED:
        return
    store = ConfigStore.instance()
    store.store(name="opi_schema", node=OPIConfig)
    for group, schema in GROUP_SCHEMAS.items():
        store.store(group="schema", name=group, node=schema)
    for group, key in COMPONENT_GROUPS.items():
        schema_group = f"schema/{'reader' if key else group}"
        for path in sorted(Path(conf_dir, group).glob("*.yaml")):
            node = yaml.safe_load(path.read_text()) or {}
            target = (node.get(key) or {}).get("_target_") if key else node.get("_target_")
            if not target or target == "???":
                continue  # a component chosen at the command line (retriever=custom): no schema to check against
            from hydra.utils import get_object

            cls = get_object(target)
            if dataclasses.is_dataclass(cls):
                store.store(group=schema_group, name=path.stem, node=components.component_schema(cls))
    _REGISTERED.append(True)


def typed(cfg: DictConfig, overridden: list[str] = ()) -> OPIConfig:
    """The checked, typed configuration. ``overridden``: the user's command-line overrides, to refuse the ones
    that would change nothing (``retriever.*`` in an A-/S- configuration)."""
    config: OPIConfig = OmegaConf.to_object(cfg)
    config.retriever = components.check(config.retriever, "retriever")
    config.retrievers = {name: components.check(node, f"retrievers.{name}") for name, node in config.retrievers.items()}
    config.combination = components.check(config.combination, "combination")
    config.classifier = components.check(config.classifier, "classifier")
    config.llm.reader = components.check(config.llm.reader, "llm.reader")
    if not config.single:
        unused = [o for o in overridden if o.lstrip("+~").split("=")[0].split(".")[0] == "retriever"]
        if unused:
            raise ValueError(f"{unused[0]!r} changes nothing in {config.combination.name}, whose members come from "
                             f"`retrievers`: set retrievers.<member>.<setting> (members: "
                             f"{', '.join(config.combination.members)})")
        missing = [m for m in config.combination.members if m not in config.retrievers]
        if missing:
            raise ValueError(f"combination.members {missing} have no config under `retrievers` (known: "
                             f"{sorted(config.retrievers)}); add one with +retriever@retrievers.<name>=<option>")
    needs_endpoint = [what for what, needed in [
        (f"the classifier {config.classifier.name}", "client" in components.accepted(type(config.classifier),
                                                                                       ["client"])),
        ("metrics.correctness", config.metrics.correctness), ("metrics.judge", config.metrics.judge)] if needed]
    if needs_endpoint and not config.llm.endpoint:
        raise ValueError(f"{' and '.join(needs_endpoint)} send requests through the configured LLM endpoint, and "
                         f"llm={config.llm.name} has none: choose an OpenAI-compatible llm (llm=gpt-4o, llm=local, ...)")
    return config


@dataclass(frozen=True)
class Identity:
    """What a configuration is, as MLflow tags and report fields."""
    setup: str  # kNN, A-Four, ...
    kind: str  # single | A- | S-
    members: tuple[str, ...]  # the retrievers it runs (display names)
    name: str  # the run name: setup | reader | classifier
    bound: str | None = None  # lower (random) or upper (oracle): a reference point, not a contender

    def tags(self) -> dict[str, str]:
        return {"opi.setup": self.setup, "opi.kind": self.kind, "opi.members": ",".join(self.members),
                **({"opi.bound": self.bound} if self.bound else {})}


def describe(config: OPIConfig) -> Identity:
    members = tuple(getattr(r, "name", type(r).__name__) for r in config.members().values())
    setup = members[0] if config.single else config.combination.name
    classifier = getattr(config.classifier, "name", type(config.classifier).__name__)
    bound = getattr(config.retriever, "bound", None) if config.single else None
    return Identity(setup, config.combination.kind, members, f"{setup} | {config.llm.name} | {classifier}", bound)


def settings_of(component: Any) -> dict[str, Any]:
    """A built component's settings (``_target_`` + fields that are not resources), as plain data."""
    if dataclasses.is_dataclass(component):
        values = {f.name: getattr(component, f.name) for f in dataclasses.fields(component)
                  if f.init and f.name not in components.RESOURCES}
    else:
        values = {k: v for k, v in vars(component).items() if not k.startswith("_") and k not in components.RESOURCES}
    return {"_target_": components.target_of(type(component)), **_plain(values)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def effective_settings(config: OPIConfig) -> dict[str, Any]:
    """Every setting of the configuration as plain data, components by their settings, with only the retrievers
    it runs: ``retriever`` for a single one, ``retrievers.<member>`` for a combination."""
    plain = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    plain.pop("train")
    members = {name: settings_of(r) for name, r in config.members().items()}
    plain["retriever"], plain["retrievers"] = (members["retriever"], {}) if config.single else (None, members)
    if plain["retriever"] is None:
        plain.pop("retriever")
    else:
        plain.pop("retrievers")
    plain["combination"] = settings_of(config.combination)
    plain["classifier"] = settings_of(config.classifier)
    llm = _plain(config.llm)
    llm["reader"] = settings_of(config.llm.reader)
    plain["llm"] = llm
    return {name: _plain(value) for name, value in plain.items()}
