"""What a configuration is, and what its results depend on, as plain data.

- ``describe``: its identity (retrieval, reader, classifier, kind, setup, members) as fields, never parsed from a
  name: MLflow tags and report fields.
- ``effective_settings``: the settings a configuration's results depend on, for MLflow params and the
  configuration's cache key: the combination's members' settings, not the unused ``retriever`` node, and the other
  way round.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from opi import components
from opi.embeddings import resolved
from opi.rerankers import NoReranker
from opi.schemas import EmbeddingConfig, OPIConfig


@dataclass(frozen=True)
class Identity:
    """What a configuration is, as MLflow tags and report fields."""
    setup: str  # kNN, A-Four, ...
    kind: str  # single | A- | S-
    members: tuple[str, ...]  # the retrievers it runs (display names)
    retrieval: str  # setup, and its reranker: kNN, kNN > cross-encoder
    reader: str  # llm.name
    classifier: str | None  # None: the run has no gold relations (relations.gold=none)
    bound: str | None = None  # lower (random) or upper (oracle): a reference point, not a contender

    @property
    def name(self) -> str:
        """The full description: retrieval | reader | classifier."""
        return " | ".join([self.retrieval, self.reader, *([self.classifier] if self.classifier else [])])

    def tags(self) -> dict[str, str]:
        return {"opi.setup": self.setup, "opi.kind": self.kind, "opi.members": ",".join(self.members),
                **({"opi.bound": self.bound} if self.bound else {})}

    def description_tags(self) -> dict[str, str]:
        """Its parts and full description, for a run whose name is short (``opi.naming``)."""
        return {"opi.retrieval": self.retrieval, "opi.reader": self.reader, "opi.description": self.name,
                **({"opi.classifier": self.classifier} if self.classifier else {})}


def describe(config: OPIConfig) -> Identity:
    members = tuple(r.label for r in config.members().values())
    setup = members[0] if config.single else config.combination.name
    bound = config.retriever.bound if config.single else None
    retrieval = setup if isinstance(config.rerank, NoReranker) else f"{setup} > {config.rerank.name}"
    return Identity(setup, config.combination.kind, members, retrieval, config.llm.name,
                    next(iter(classifier_names(config)), None), bound)


def live_stores(config: OPIConfig) -> list:
    """The configuration's members that ask a live service for their rankings (``retriever=vectorstore``)."""
    return [member for member in config.members().values() if member.live]


def own_embedding(config: OPIConfig, component: Any) -> EmbeddingConfig:
    """The embedding model ``component`` uses: its own ``embedding`` settings over the run's ``embedding``."""
    return resolved(config.embedding, getattr(component, "embedding", None))


def component_embeddings(config: OPIConfig) -> dict[str, EmbeddingConfig]:
    """Each component of the configuration that embeds, by its config path, with the model it uses."""
    users = {**({"retriever": config.retriever} if config.single else
                {f"retrievers.{name}": member for name, member in config.members().items()}),
             "llm.reader": config.llm.reader, "classifier": config.classifier}
    return {path: own_embedding(config, component) for path, component in users.items()
            if hasattr(component, "embedding")}


def classifier_names(config: OPIConfig) -> list[str]:
    """The relation classifier as runs show it; none when the run has no gold relations (``relations.gold=none``)."""
    if config.relations.gold == "none":
        return []
    return [config.classifier.name]


def settings_of(component: Any) -> dict[str, Any]:
    """A built component's settings (``_target_`` + fields that are not resources), as plain data."""
    if dataclasses.is_dataclass(component):
        values = {f.name: getattr(component, f.name) for f in dataclasses.fields(component)
                  if f.init and f.name not in components.RESOURCES}
    else:
        values = {k: v for k, v in vars(component).items() if not k.startswith("_") and k not in components.RESOURCES}
    settings = plain(values)
    if isinstance(settings.get("embedding"), dict):  # a component's own embedding: only the settings it gives
        given = {k: v for k, v in settings.pop("embedding").items() if v is not None}
        if given:
            settings["embedding"] = given
    return {"_target_": components.target_of(type(component)), **settings}


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def effective_settings(config: OPIConfig) -> dict[str, Any]:
    """Every setting that applies to the configuration, as plain data, components by their settings, with only
    the retrievers it runs: ``retriever`` for a single one, ``retrievers.<member>`` for a combination; settings
    that change nothing here (a Dask setting on threads, an endpoint's settings without an endpoint, a bundled
    split's settings on a file) are left out."""
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "train"}
    members = {name: settings_of(r) for name, r in config.members().items()}
    if config.single:
        settings["retriever"] = members["retriever"]
        settings.pop("retrievers")
    else:
        settings["retrievers"] = members
        settings.pop("retriever")
    settings["combination"] = settings_of(config.combination)
    settings["rerank"] = settings_of(config.rerank)
    settings["classifier"] = settings_of(config.classifier)
    settings["llm"] = {**plain(config.llm), "reader": settings_of(config.llm.reader)}
    settings = {name: plain(value) for name, value in settings.items()}
    for group, names in not_applicable(config).items():
        for name in names:
            settings[group].pop(name, None)
    return settings


def not_applicable(config: OPIConfig) -> dict[str, list[str]]:
    """The settings of each group that do nothing in this configuration."""
    dataset, llm, metrics = config.dataset, config.llm, config.metrics
    split = dataset.kind == "bundled" or (dataset.kind == "rag12000" and not dataset.path)
    return {
        "dataset": [*([] if dataset.kind == "bundled" and dataset.split != "all" else
                      ["split_per_relation", "test_fraction"]),
                    *([] if split else ["split"]), *([] if dataset.kind == "bundled" else ["name"]),
                    *([] if dataset.kind == "rag12000" and not dataset.path else ["hub_repo"]),
                    *([] if dataset.labels_path else ["label_join"])],
        "llm": [] if llm.endpoint else [name for name in plain(llm) if name not in ("name", "reader")],
        "metrics": [*([] if metrics.correctness else ["correctness_weights", "similarity_threshold"]),
                    *([] if metrics.correctness or metrics.judge else ["parse_retries"])],
        "orchestration": (["max_workers"] if config.orchestration.runner == "dask" else
                          ["dask_address", "dask_workers", "dask_threads_per_worker"]),
    }
