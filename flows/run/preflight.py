"""Checks before any work: the stores a run writes to, its data, and where its gold relations come from; a problem
is one ``DataError`` / ``StoreError`` (one line, exit 2) before anything is paid for. ``Preflight`` does the same
for a whole sweep, as Hydra's first callback: before the MLflow parent run or any job."""
from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict

from flows.orchestration.prefect_adapter import import_server_models
from flows.orchestration.server import ensure_api
from flows.run.config import typed
from flows.run.data import Data, load_data, training_for
from flows.run.errors import EXIT_USER_ERROR, composed, run_or_explain
from flows.run.progress import planned_sweep, start_sweep
from flows.run.store_checks import check_stores
from opi.data import DataError
from opi.relations import gold_source
from opi.schemas import OPIConfig

log = logging.getLogger("opi")
_NOTICES: set[str] = set()  # said once per process, not once per job of a sweep


def notice_once(message: str) -> None:
    if message not in _NOTICES:
        _NOTICES.add(message)
        log.warning("%s", message)


def prepared(config: OPIConfig) -> OPIConfig:
    """The configuration ready to run on its data (loaded and validated here): its stores writable, ``relations.gold``
    decided, and the data has what the retrievers need. A DataError or StoreError otherwise, before any work."""
    check_stores(config)
    data = load_data(config)
    needs_evidence = [r.name for r in config.members().values() if getattr(r, "needs_evidence", False)]
    if needs_evidence and not all(e.evidence for e in data.examples):
        missing = sum(not e.evidence for e in data.examples)
        raise DataError(f"the {needs_evidence[0]} retriever returns the chunks holding each example's gold evidence, "
                        f"and {missing} of {len(data.examples)} examples of {data.report.source} have none (an "
                        "'evidence' column): leave it out of the sweep for this data")
    config = resolve_gold(config, data)
    ensure_api()
    import_server_models()
    return config


def resolve_gold(config: OPIConfig, data: Data) -> OPIConfig:
    """``config`` with ``relations.gold`` decided (see ``opi.relations.gold_source``); a notice when it was not
    given and the data has no labels; DataError when the request cannot be met."""
    trains = getattr(config.classifier, "trains", False)
    can_label = not trains or bool(getattr(config.classifier, "registered", None)) or bool(
        getattr(config.classifier, "train_path", None))
    try:
        source, notice = gold_source(config.relations.gold, data.labelled, can_label,
                                     getattr(config.classifier, "name", "configured"), data.report.source)
    except ValueError as err:
        raise DataError(str(err)) from None
    if notice:
        notice_once(notice)
    config = dataclasses.replace(config, relations=dataclasses.replace(config.relations, gold=source))
    if source != "none":
        training_for(config, data)  # a one-relation training set is refused here, before any work
    return config


def checked_base(config: DictConfig) -> OPIConfig:
    """A sweep's base configuration (its command line without the swept values), typed and checked."""
    base = copy.deepcopy(config)
    with open_dict(base):
        base.pop("hydra", None)
    try:
        return typed(base, list(config.hydra.overrides.task))
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        raise SystemExit(EXIT_USER_ERROR) from None


class Preflight(Callback):
    """When a multirun starts: its base configuration and data checked (a problem exits 2 in one line, before the
    parent run or any job), the line saying what will run, and Prefect's server booting while the jobs compose."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        checked = run_or_explain(prepared, checked_base(config))
        loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
        size, note = planned_sweep(list(config.hydra.overrides.task), dict(config.hydra.sweeper.params or {}), loader)
        data = load_data(checked)
        log.info("%s configurations on %s (%d examples), reader %s, classifier %s, gold relations: %s; results to "
                 "%s%s", size or "the swept", data.report.source, len(data.examples), checked.llm.name,
                 getattr(checked.classifier, "name", "custom"), checked.relations.gold,
                 f"MLflow experiment {checked.tracking.experiment!r}" if checked.tracking.enabled else
                 "the output folder (tracking=none)", f" ({note})" if note else "")
        start_sweep(size)
