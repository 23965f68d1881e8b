"""From Hydra's composed config to the typed ``OPIConfig`` that travels into the code.

- ``register_configs``: the group schemas (``opi.schemas``); for every component YAML under ``conf/`` that names a
  dataclass by ``_target_``, the schema derived from that class (``opi.components.component_schema``); and the
  ``retrievers`` catalogue (every retriever option that runs on its own, mounted as ``retrievers.<option>`` for
  the members of combinations). Adding a built-in retriever is therefore its module and one YAML.
- ``compose_config``: a composed configuration outside a Hydra app (``opi-label``, ``opi-nightly``, tests).
- ``typed``: range checks, components built (without resources) so they check their own settings, and the
  cross-group rules; a problem raises ``ValueError`` with the key in its message.
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf

from flows.base.errors import EXIT_USER_ERROR, composed
from opi import components
from opi.classify import RelationClassifier
from opi.combine import Combination
from opi.llm.reader import Reader
from opi.rerankers import NoReranker, Reranker, reranks
from opi.retrievers.base import Retriever
from opi.secrets import resolved_settings_problem, settings_problem
from opi.schemas import (ChunkingConfig, DatasetConfig, EmbeddingConfig, LLMConfig, MetricsConfig, OPIConfig,
                         OrchestrationConfig, RelationsConfig, ReportConfig, TrackingConfig, TrainConfig)

log = logging.getLogger("opi")
CONF_DIR = str(Path(__file__).resolve().parent.parent.parent / "conf")
GROUP_SCHEMAS = {"dataset": DatasetConfig, "relations": RelationsConfig, "chunking": ChunkingConfig,
                 "embedding": EmbeddingConfig, "llm": LLMConfig, "metrics": MetricsConfig, "tracking": TrackingConfig,
                 "report": ReportConfig, "orchestration": OrchestrationConfig, "train": TrainConfig}
# component groups: where in each YAML the component sits ("" = the whole file; the llm files hold a reader)
COMPONENT_GROUPS = {"retriever": "", "combination": "", "rerank": "", "classifier": "", "llm": "reader"}


def options(group: str, conf_dir: str = CONF_DIR) -> list[str]:
    """The options of a config group: its YAML files."""
    return sorted(path.stem for path in Path(conf_dir, group).glob("*.yaml"))


def component_class(group: str, option: str, conf_dir: str = CONF_DIR) -> type | None:
    """The class an option's YAML names by ``_target_`` (None when the user names it: ``retriever=custom``)."""
    node = yaml.safe_load(Path(conf_dir, group, f"{option}.yaml").read_text()) or {}
    key = COMPONENT_GROUPS[group]
    target = (node.get(key) or {}).get("_target_") if key else node.get("_target_")
    return None if not target or target == "???" else get_object(target)


def catalogue_members(conf_dir: str = CONF_DIR) -> list[str]:
    """The retriever options that run on their own settings (not ``custom``, not ``langchain``): every one is
    mounted as ``retrievers.<option>``, so combinations can name it as a member."""
    members = []
    for option in options("retriever", conf_dir):
        cls = component_class("retriever", option, conf_dir)
        try:
            cls is not None and cls()
        except ValueError:  # needs a setting the user gives (langchain: a factory or a vector store)
            continue
        if cls is not None:
            members.append(option)
    return members


@lru_cache(maxsize=None)
def register_configs(conf_dir: str = CONF_DIR) -> None:
    """Store every schema in Hydra's ConfigStore under ``schema/...`` (each option's defaults list pulls its own
    ``/schema/<group>[/<option>]@...``, so that ``retriever=glob(*)`` sweeps real options only), and the
    ``retrievers`` catalogue under ``catalogue/retrievers``."""
    store = ConfigStore.instance()
    store.store(name="opi_schema", node=OPIConfig)
    for group, schema in GROUP_SCHEMAS.items():
        store.store(group="schema", name=group, node=schema)
    for group, key in COMPONENT_GROUPS.items():
        for option in options(group, conf_dir):
            cls = component_class(group, option, conf_dir)
            if cls is not None and dataclasses.is_dataclass(cls):
                store.store(group=f"schema/{'reader' if key else group}", name=option,
                            node=components.component_schema(cls))
    store.store(group="catalogue", name="retrievers",
                node={"defaults": [{f"/retriever@{name}": name} for name in catalogue_members(conf_dir)]})


def compose_config(overrides: list[str], config_name: str = "config") -> DictConfig:
    """The configuration ``opi-eval`` would compose from these overrides (outside a Hydra app)."""
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name, overrides=list(overrides))


# what the run calls on a component of each group (each entry: one of these methods), and how to write one
KINDS = {
    "retriever": ("a retriever", [("prepare",), ("rank_examples",)],
                  "subclass opi.retrievers.Retriever and implement score() or rank()", "MyRetriever"),
    "combination": ("a combination", [("combine",), ("ranking",)],
                    "subclass opi.combine.Combination and implement combine() and ranking()", "MyCombination"),
    "rerank": ("a reranker", [("scores", "score_many")],
               "subclass opi.rerankers.Reranker and implement scores() or score_many()", "MyReranker"),
    "classifier": ("a relation classifier", [("predict",)],
                   "subclass opi.classify.RelationClassifier and implement predict(triples, progress=None)",
                   "MyClassifier"),
    "llm.reader": ("a reader", [("answer",)],
                   "subclass opi.llm.reader.Reader and implement answer(questions, sentence_lists, progress=None)",
                   "MyReader"),
}


# the base class of each group's components: it declares what the run reads of one (opi.components' protocols)
BASES = {"retriever": Retriever, "combination": Combination, "rerank": Reranker, "classifier": RelationClassifier,
         "llm.reader": Reader}


def kind_check(group: str):
    """The check ``components.check`` makes of a ``group`` component's class: None when the run can use it, else
    what it is not and how to write one."""
    what, needs, how, _ = KINDS[group]

    def problem(cls: Any) -> str | None:
        if group == "rerank" and cls is NoReranker:
            return None
        missing = [" or ".join(f"{name}()" for name in names) for names in needs
                   if not any(callable(getattr(cls, name, None)) for name in names)]
        if missing:
            return f"is not {what} (it has no {' and no '.join(missing)}): {how}"
        base = BASES.get(group)
        if base is not None and isinstance(cls, type) and not issubclass(cls, base):
            return f"is not a subclass of {base.__module__}.{base.__name__}, which says what the run asks of it: {how}"
        return None

    return problem


def component_nodes(cfg: DictConfig) -> dict[str, str]:
    """Where each component sits in ``cfg``, by the group whose kind it is: {"retriever": "retriever",
    "retrievers.mmr": "retriever", ..., "llm.reader": "llm.reader"}."""
    nodes = {"retriever": "retriever", **{f"retrievers.{name}": "retriever" for name in cfg.get("retrievers") or {}},
             "combination": "combination", "rerank": "rerank", "classifier": "classifier", "llm.reader": "llm.reader"}
    return {path: group for path, group in nodes.items() if OmegaConf.select(cfg, path, default=None) is not None}


def check_targets(cfg: DictConfig, choices: dict | None = None) -> None:
    """Every component names its class: ``retriever=custom`` without ``retriever._target_`` is refused in one line
    (not a traceback from deep in OmegaConf). ``choices``: the options the configuration was composed of."""
    choices = choices or {}
    for path, group in component_nodes(cfg).items():
        node = OmegaConf.select(cfg, path)
        if isinstance(node, DictConfig) and "_target_" in node.keys() and OmegaConf.is_missing(node, "_target_"):
            group_name = path.split(".")[0]  # llm.reader: the llm group's option
            option = path if path.startswith("retrievers.") else f"{group_name}={choices.get(group_name) or 'custom'}"
            raise ValueError(f"{option} needs {path}._target_: the import path of your class, e.g. "
                             f"{path}._target_=my_pkg.{KINDS[group][3]} ({KINDS[group][2]})")


def unused_combination_settings(cfg: DictConfig, overridden: list[str]) -> list[tuple[str, str]]:
    """(override, setting) of each ``combination.<setting>`` override whose combination has no such setting
    (``combination.k`` in a single retriever's or an S- configuration, added with ``++``)."""
    node = cfg.get("combination")
    if not isinstance(node, DictConfig) or "_target_" not in node.keys() or OmegaConf.is_missing(node, "_target_"):
        return []
    try:
        cls = components.imported(node._target_)
    except ValueError:
        return []  # said when the combination is built
    settings = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(
        inspect.signature(cls).parameters)
    keys = [(override, override.lstrip("+~").split("=", 1)[0].split(".")) for override in overridden]
    return [(override, key[1]) for override, key in keys
            if len(key) > 1 and key[0] == "combination" and key[1] not in settings | {"_target_"}]


def check_combination_settings(cfg: DictConfig, overridden: list[str], choices: dict | None = None) -> None:
    """A ``combination.<setting>`` override that changes nothing is refused (as ``retriever.*`` in an A-/S-
    configuration is), naming the configuration (and the setup, in a sweep over setups) it changes nothing in."""
    setup = (choices or {}).get("setup")
    chosen = f" (setup={setup})" if setup else ""
    for override, setting in unused_combination_settings(cfg, overridden)[:1]:
        given = override.lstrip("+")
        if not cfg.combination.get("members"):
            name = OmegaConf.select(cfg, "retriever.name", default=None) or "the single retriever"
            raise ValueError(f"{given!r} changes nothing in {name}{chosen}, a single retriever (no combination): "
                             f"its settings are retriever.* (retriever.{setting}=...)")
        hint = " (each member keeps its own top k: set retrievers.<member>.k)" if setting == "k" else ""
        raise ValueError(f"{given!r} changes nothing in {cfg.combination.get('name')}{chosen}, which has no setting "
                         f"{setting!r}{hint}")


def typed(cfg: DictConfig, overridden: list[str] = (), choices: dict | None = None) -> OPIConfig:
    """The checked, typed configuration. ``overridden``: the user's command-line overrides, to refuse the ones
    that would change nothing (``retriever.*`` in an A-/S- configuration, ``combination.k`` in a single one);
    ``choices``: the options it was composed of, for messages (default: the running Hydra job's)."""
    if choices is None:
        choices = dict(HydraConfig.get().runtime.choices) if HydraConfig.initialized() else {}
    refuse_secrets(cfg)
    check_targets(cfg, choices)
    check_combination_settings(cfg, list(overridden), choices)
    config: OPIConfig = OmegaConf.to_object(cfg)
    config.retriever = components.check(config.retriever, "retriever", kind_check("retriever"))
    config.retrievers = {name: components.check(node, f"retrievers.{name}", kind_check("retriever"))
                         for name, node in config.retrievers.items()}
    config.combination = components.check(config.combination, "combination", kind_check("combination"))
    config.rerank = components.check(config.rerank, "rerank", kind_check("rerank"))
    if choices.get("rerank") == "none" and not isinstance(config.rerank, NoReranker):
        raise ValueError(f"rerank=none runs {type(config.rerank).__module__}.{type(config.rerank).__name__}: a "
                         f"rerank.* override applies to every job of a sweep, the none arm too; compare with a grid "
                         f"instead, e.g. -m \"hydra.sweeper.grids=[{{rerank:none}},{{rerank:custom,rerank._target_:"
                         f"my_pkg.MyReranker}}]\"")
    config.classifier = components.check(config.classifier, "classifier", kind_check("classifier"))
    config.llm.reader = components.check(config.llm.reader, "llm.reader", kind_check("llm.reader"))
    if not config.single:
        check_members(config, overridden)
    check_candidates(config)
    check_endpoint(config)
    return config


# of Hydra's own settings, those a user's YAML or command line can fill with values that Hydra then writes down (its
# saved configs, the output folders' names)
HYDRA_WRITTEN = ("hydra.job.env_set", "hydra.sweeper.params", "hydra.sweeper.grids", "hydra.run.dir", "hydra.sweep.dir",
                 "hydra.sweep.subdir", "hydra.job.name")


def refuse_secrets(cfg: DictConfig) -> None:
    """A secret in any setting (a YAML file's as well as the command line's), as written or as it resolves
    (``${oc.env:OPENAI_API_KEY}``, a resolver of your own): refused, never written down."""
    settings = OmegaConf.to_container(cfg, resolve=False)
    hydra = settings.pop("hydra", None) or {}
    settings["hydra.job.env_set"] = (hydra.get("job") or {}).get("env_set") or {}
    settings["hydra.sweeper.params"] = (hydra.get("sweeper") or {}).get("params") or {}
    settings["hydra.sweeper.grids"] = (hydra.get("sweeper") or {}).get("grids") or []
    problem = settings_problem(settings) or resolved_settings_problem(leaves(cfg))
    if problem:
        raise ValueError(problem)


def leaves(node: DictConfig | ListConfig, prefix: str = ""):
    """(path, value as resolved, its text where it is an interpolation, else None) of every setting under ``node`` a
    run writes down (of Hydra's, ``HYDRA_WRITTEN``); a value that does not resolve here (an unset variable, Hydra's
    runtime) is left to Hydra."""
    written = OmegaConf.to_container(node, resolve=False)
    for key in node.keys() if isinstance(node, DictConfig) else range(len(node)):
        path = f"{prefix}{key}"
        if path.startswith("hydra") and not any(path.startswith(w) or w.startswith(f"{path}.") for w in HYDRA_WRITTEN):
            continue
        try:
            value = node[key]
        except Exception:  # noqa: BLE001 - whatever a resolver raises, Hydra reports it when it resolves the value
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            yield from leaves(value, f"{path}.")
        else:
            yield path, value, written[key] if OmegaConf.is_interpolation(node, key) else None


def check_members(config: OPIConfig, overridden: list[str]) -> None:
    unused = [o for o in overridden if o.lstrip("+~").split("=")[0].split(".")[0] == "retriever"]
    if unused:
        raise ValueError(f"{unused[0]!r} changes nothing in {config.combination.name}, whose members come from "
                         f"`retrievers`: set retrievers.<member>.<setting> (members: "
                         f"{', '.join(config.combination.members)})")
    missing = [m for m in config.combination.members if m not in config.retrievers]
    if missing:
        raise ValueError(f"combination.members {missing} have no config under `retrievers` (known: "
                         f"{sorted(config.retrievers)}); add one with +retriever@retrievers.<name>=<option>")


def check_candidates(config: OPIConfig) -> None:
    """A reranker reads at least the chunks the reader gets."""
    if not reranks(config.rerank):
        return
    if config.single:
        cuts = {"retriever.k": config.retriever.k}
    elif config.combination.ordered:  # A-: the fused ranking is reranked, then cut to the combination's k
        cuts = {"combination.k": config.combination.k}
    else:  # S-: each member's candidates are reranked, then cut to its k
        cuts = {f"retrievers.{name}.k": member.k for name, member in config.members().items()}
    for where, k in cuts.items():
        if k is not None and config.rerank.candidates < k:
            raise ValueError(f"rerank.candidates ({config.rerank.candidates}) is smaller than {where} ({k}): the "
                             f"reranker would hand on fewer chunks than k; set rerank.candidates>={k}")


def check_endpoint(config: OPIConfig) -> None:
    """What sends requests through the LLM endpoint needs one."""
    needs_endpoint = [what for what, needed in [
        (f"the classifier {config.classifier.name}", config.classifier.asks_llm),
        (f"the reranker {config.rerank.name}", reranks(config.rerank) and config.rerank.asks_llm),
        ("metrics.correctness", config.metrics.correctness), ("metrics.judge", config.metrics.judge)] if needed]
    if needs_endpoint and not config.llm.endpoint:
        raise ValueError(f"{' and '.join(needs_endpoint)} send requests through the configured LLM endpoint, and "
                         f"llm={config.llm.name} has none: choose an OpenAI-compatible llm (llm=gpt-4o, llm=local, ...)")


def checked(cfg: DictConfig) -> OPIConfig:
    """The typed configuration of a Hydra job after every check; a problem exits 2 with the reason, in one line."""
    composed()
    overridden = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    try:
        return typed(cfg, overridden)
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        sys.exit(EXIT_USER_ERROR)
