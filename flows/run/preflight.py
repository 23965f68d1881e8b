"""Checks before any work: the stores a run writes to, its data, and where its gold relations come from; a problem
is one ``DataError`` / ``StoreError`` (one line, exit 2) before anything is paid for. ``Preflight`` does the same
for a whole sweep, as Hydra's first callback: before the MLflow parent run or any job."""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import logging
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from flows.orchestration.server import check_users_api
from flows.run.config import check_combination_settings, refuse_secrets, typed, unused_combination_settings
from flows.run.data import Data, load_data, training_for
from flows.base.errors import EXIT_USER_ERROR, CommandError, composed, run_or_explain
from flows.run.identity import component_embeddings, describe, live_stores, own_embedding
from flows.run.race import metric_problem, race_metric
from flows.base.progress import planned_sweep, start_sweep
from hydra_plugins.opi_sweeper import forget_composed, keep_composed, sweep_of
from flows.base.store_checks import check_stores, note_sweep_folder
from flows.tracking.registry import resolve_registered
from opi.memory import MEMORY
from opi.data import DataError
from opi.embeddings.local import model_problem
from opi.llm.client import api_key, check_keys
from opi.relations import gold_source
from opi.rerankers import reranks
from opi.schemas import EmbeddingConfig, OPIConfig
from opi.chunking import word_count
from opi.components import one_line
from opi.sentences import UNSPACED_LANGUAGES, has_rules

log = logging.getLogger("opi")


def notice_once(message: str) -> None:
    """Said once per process, not once per job of a sweep."""
    if MEMORY.first_time("said", message):
        log.warning("%s", message)


def prepared(config: OPIConfig) -> OPIConfig:
    """The configuration ready to run on its data (loaded and validated here): its stores writable, ``relations.gold``
    decided, and the data has what the retrievers need. A DataError or StoreError otherwise, before any work."""
    check_models(config)
    check_stores(config)
    resolve_registered(config)  # a registered classifier's name or alias the store does not know: one line now
    check_vector_store(config)
    data = load_data(config)
    config = chunking_for_language(config)
    warn_unspaced(config, data)
    needs_evidence = [r.name for r in config.members().values() if r.needs_evidence]
    if needs_evidence and not all(e.evidence for e in data.examples):
        missing = sum(not e.evidence for e in data.examples)
        raise DataError(f"the {needs_evidence[0]} retriever returns the chunks holding each example's gold evidence, "
                        f"and {missing} of {len(data.examples)} examples of {data.report.source} have none (an "
                        "'evidence' column): leave it out of the sweep for this data")
    config = resolve_gold(config, data)
    check_key_variable(config)
    check_users_api()
    return config


def check_vector_store(config: OPIConfig) -> None:
    """A vector store member (``retriever=vectorstore``) reachable, holding its collection, with vectors of its
    query embedding's dimension, before any example (one line otherwise); what it holds said once. One store a
    configuration: its documents are the configuration's chunks."""
    live = live_stores(config)
    if not live:
        return
    if len({(m.backend, m.url, m.path, m.collection) for m in live}) > 1:
        raise CommandError("a configuration evaluates one vector store (its documents are the chunks every member "
                           f"ranks): {live[0].where} and {live[1].where} are two; compare them in a sweep")
    from opi.embeddings import embedder_for

    facts = live[0].check(embedder_for(own_embedding(config, live[0])))
    if MEMORY.first_time("said", live[0].where):
        log.info("%s: %d documents, %s; read only, asked again each run", live[0].where, facts["documents"],
                 facts["server"])


def chunking_for_language(config: OPIConfig) -> OPIConfig:
    """A language pySBD has no rules for is split at line breaks and . ? ! (said once); one written without spaces
    and without rules (Thai) is chunked by characters, since it has no words to count (said once)."""
    language, chunking = config.sentences.language, config.chunking
    if has_rules(language):
        return config
    notice_once(f"sentences.language={language}: pySBD has no sentence rules for it, so sentences end at line "
                "breaks and at . ? ! only")
    if language not in UNSPACED_LANGUAGES or chunking.length == "characters":
        return config
    notice_once(f"sentences.language={language} is written without spaces: chunks are measured in characters "
                f"(chunking.length=characters, {chunking.size} characters, {chunking.overlap} overlapping)")
    return dataclasses.replace(config, chunking=dataclasses.replace(chunking, length="characters"))


UNSPACED_RATIO = 20  # characters per word above which a text is surely not written with spaces (English: ~6)


def warn_unspaced(config: OPIConfig, data: Data) -> None:
    """Articles with far fewer words than characters (Chinese, Japanese, Thai) counted in words: said once."""
    if config.chunking.length == "characters":
        return
    counted = [(word_count(text), len(text)) for text in data.contexts if len(text) > 200]
    unspaced = [(words, characters) for words, characters in counted if words * UNSPACED_RATIO < characters]
    if unspaced:
        words, characters = unspaced[0]
        notice_once(f"{len(unspaced)} of {len(data.contexts)} articles have far fewer words than characters (e.g. "
                    f"{words} word{'s' if words != 1 else ''} in {characters:,} characters): text written without "
                    "spaces is one 'word' per sentence or article, so its chunks are whole articles; set "
                    "sentences.language (zh, ja, th ...) and chunking.length=characters")


def check_key_variable(config: OPIConfig) -> None:
    """The variables ``llm.api_key_env`` and every embedding endpoint's ``api_key_env`` name are set, where the run
    talks to an endpoint (null: a keyless one)."""
    if config.llm.endpoint and config.llm.local_server is None:
        api_key(config.llm)
    check_keys(embedding_settings(config))


def embedding_settings(config: OPIConfig) -> dict[str, EmbeddingConfig]:
    """Every embedding model the run uses, by config path: the run's, the yardstick, components' own."""
    return {"embedding": config.embedding, "metrics.similarity": config.metrics.similarity,
            **{f"{path}.embedding": settings for path, settings in component_embeddings(config).items()}}


def check_models(config: OPIConfig, models: dict[str, str] | None = None) -> None:
    """Every model the run loads here is here (a folder, an installed package, the hub's cache when offline): one
    line naming the setting and what to do otherwise, before the data loads. ``models``: these only (by setting),
    not the whole run's (``classifier_models``)."""
    for setting, model in (loaded_models(config) if models is None else models).items():
        problem = model_problem(model)
        if problem:
            raise CommandError(f"model problem: {setting}={model}: {problem}")
    server = config.llm.local_server
    if server is not None:
        from opi.llm.local_server import INSTALL_HINT, model_path

        try:
            model_path(server.model)
        except (ValueError, RuntimeError) as err:
            why = "no such file: give the path of a .gguf model" if server.model.endswith(".gguf") else err
            raise CommandError(f"model problem: llm.local_server.model={server.model}: {why}") from None
        if importlib.util.find_spec("xllamacpp") is None:
            raise CommandError(f"model problem: llm={config.llm.name} serves its model with xllamacpp, which is not "
                               f"installed: {INSTALL_HINT}")


def loaded_models(config: OPIConfig) -> dict[str, str]:
    """The models the run loads here, by the setting that names each: sentence-transformers embeddings (the run's,
    the yardstick, components' own; a model once, by the first setting naming it) and the models components name in
    ``local_models`` (a cross-encoder's)."""
    models: dict[str, str] = {}
    for path, settings in embedding_settings(config).items():
        if settings.provider == "sentence-transformers" and settings.model not in models.values():
            models[f"{path}.model"] = settings.model
    users = {**({"rerank": config.rerank} if reranks(config.rerank) else {}), "llm.reader": config.llm.reader,
             "classifier": config.classifier, **({"retriever": config.retriever} if config.single else
                                                 {f"retrievers.{n}": m for n, m in config.members().items()})}
    for path, component in users.items():
        models.update({f"{path}.{name}": getattr(component, name) for name in getattr(component, "local_models", ())})
    return models


def classifier_models(config: OPIConfig) -> dict[str, str]:
    """The models the relation classifier alone loads (``opi-train-classifier``, ``opi-label import``), by the
    setting that names each: its embedding (its own, over the run's) and those it names in ``local_models``."""
    models: dict[str, str] = {}
    classifier = config.classifier
    if hasattr(classifier, "embedding"):
        settings = component_embeddings(config)["classifier"]
        if settings.provider == "sentence-transformers":
            own = classifier.embedding
            own = own.get("model") if isinstance(own, dict) else getattr(own, "model", None)
            models["classifier.embedding.model" if own else "embedding.model"] = settings.model
    models.update({f"classifier.{name}": getattr(classifier, name) for name in getattr(classifier, "local_models", ())})
    return models


def resolve_gold(config: OPIConfig, data: Data) -> OPIConfig:
    """``config`` with ``relations.gold`` decided (see ``opi.relations.gold_source``); a notice when it was not
    given and the data has no labels; DataError when the request cannot be met."""
    trains = config.classifier.trains
    # a classifier that learns can label the data's own gold triples cross-fitted on its labels, as the paper
    # labels unlabelled data: no gold triple is labelled by a model that saw it
    can_label = not trains or bool(config.classifier.registered) or bool(config.classifier.train_path) or \
        data.labelled == "all"
    try:
        source, notice = gold_source(config.relations.gold, data.labelled, can_label,
                                     config.classifier.name, data.report.source)
    except ValueError as err:
        raise DataError(str(err)) from None
    if notice:
        notice_once(notice)
    config = dataclasses.replace(config, relations=dataclasses.replace(config.relations, gold=source))
    if source != "none":
        training_for(config, data)  # a one-relation training set is refused here, before any work
    return config


def checked_base(config: DictConfig) -> OPIConfig:
    """A sweep's base configuration (its command line without the swept values), typed and checked. A
    ``combination.<setting>`` its own combination lacks is left out: it is there for the swept setups' combinations
    (``-m setup=a_seven,a_four combination.k=null``), each job is checked with it (``check_jobs``)."""
    base = copy.deepcopy(config)
    overrides = list(config.hydra.overrides.task)
    with open_dict(base):
        base.pop("hydra", None)
        unused = unused_combination_settings(base, overrides)
        if unused:  # a structured node deletes nothing: the combination's settings without those
            settings = OmegaConf.to_container(base.combination, resolve=False)
            base.combination = {key: value for key, value in settings.items()
                                if key not in {setting for _, setting in unused}}
    try:
        return typed(base, [o for o in overrides if o not in {given for given, _ in unused}],
                     dict(config.hydra.runtime.choices))
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        raise SystemExit(EXIT_USER_ERROR) from None


def check_jobs(config: DictConfig, loader: Any) -> None:
    """Every job of a sweep composed and checked as it will be when it runs, before the sweep's MLflow parent run
    opens: a job that cannot compose, or whose configuration is refused (``retriever=custom`` without its class,
    ``combination.k`` in a single retriever's configuration), ends the sweep in one line, exit 2."""
    if loader is None:
        return
    try:
        jobs = sweep_of(config, loader).jobs
    except Exception:  # noqa: BLE001 - the sweeper refuses it, with its own message
        return
    forget_composed()
    configurations = []
    for job in jobs:
        try:
            composed_job, choices = job_config(config, loader, job, keep=True)
        except (HydraException, OmegaConfBaseException) as err:
            log.error("%s", composition_problem(config, loader, job, err))
            raise SystemExit(EXIT_USER_ERROR) from None
        try:
            configurations.append(typed(composed_job, list(job), choices))
        except ValueError as err:
            log.error("invalid configuration: %s", err)
            raise SystemExit(EXIT_USER_ERROR) from None
    problem = race_problem(configurations) or models_problem(configurations)
    if problem:
        log.error("%s", problem)
        raise SystemExit(EXIT_USER_ERROR)
    said = headline_only(configurations)
    if said:
        log.warning("%s", said)


def headline_only(configurations: list[OPIConfig]) -> str | None:
    """What to say when jobs differ only in ``metrics.beta`` (-m beta='glob(*)'): they compute the same results,
    and the report would rank one configuration against itself."""
    unweighted = [dataclasses.replace(c, metrics=dataclasses.replace(c.metrics, beta=1.0)) for c in configurations]
    for i, one in enumerate(unweighted):
        same = [configurations[j].metrics.beta for j in range(i, len(unweighted)) if unweighted[j] == one]
        if len(set(same)) > 1:
            betas = ", ".join(f"{b:g}" for b in same)
            return (f"{describe(configurations[i]).retrieval} runs at metrics.beta={betas}, "
                    f"which changes only which OPI is the headline: the runs are the same configuration, and every "
                    f"run logs OPI at metrics.betas={list(configurations[i].metrics.betas)}; to rank by OPI-2, run "
                    "once with beta=opi-2 (or opi-report --beta 2)")
    return None


def models_problem(configurations: list[OPIConfig]) -> str | None:
    """A model some job of the sweep loads that is not here (a grid's reranker folder), before the first job runs:
    each job's own preflight would find it only when that job's turn came."""
    for configuration in configurations:
        try:
            check_models(configuration)
        except CommandError as err:
            return str(err)
    return None


def race_problem(configurations: list[OPIConfig]) -> str | None:
    """Why the sweep's configurations cannot be raced (None: they can, or the sweep is a grid)."""
    if not configurations or all(c.sweep.strategy == "grid" for c in configurations):
        return None
    contenders = [c for c in configurations if not any(m.bound for m in c.members().values())]
    if len(contenders) < 2:
        return (f"sweep.strategy=race needs at least two configurations to race, and this sweep has "
                f"{len(contenders) or 'none'} (the random and oracle bounds are not raced): sweep more "
                "(-m setup=knn,bm25,...) or leave sweep.strategy at grid")
    for i, contender in enumerate(contenders):
        if contender in contenders[:i]:
            return (f"the sweep lists one configuration twice ({describe(contender).name}): a race compares "
                    "distinct configurations, so list each once")
    first = configurations[0]
    for name in ("sweep", "race", "dataset", "seed"):
        if any(getattr(c, name) != getattr(first, name) for c in configurations):
            return (f"a race compares configurations on the same examples with one set of race settings: "
                    f"{name}{'' if name == 'seed' else '.*'} must not vary across its configurations")
    problem = metric_problem(first) or budget_problem(contenders)
    metric = race_metric(first)
    if problem is None and metric.startswith(("ndcg_at_", "mrr")):
        unordered = [describe(c).name for c in contenders if not c.combination.ordered]
        if unordered:
            problem = (f"race.metric={metric} ranks chunks, and {unordered[0]} has no ranking of its own (an S- "
                       "combination hands on the union of its members' sentences): race on recall_at_<k>, bertsim "
                       "or opi_<β>, or leave the S- configurations out")
    return problem


def budget_problem(contenders: list[OPIConfig]) -> str | None:
    """Why ``race.budget`` could never be spent in its unit (None: it can, or there is none): LLM calls with no
    endpoint to call, dollars with no price to pay."""
    race = contenders[0].race
    if race.budget is None or race.budget_unit == "examples":
        return None
    endpoints = [endpoint for c in contenders for endpoint in (
        *([c.llm] if c.llm.endpoint else []),
        *(e for e in embedding_settings(c).values() if e.provider == "openai-compatible"))]
    if not endpoints:
        return (f"race.budget_unit={race.budget_unit}: no configuration of this sweep calls an LLM or embedding "
                "endpoint, so the budget could never be spent: give it in examples (race.budget_unit=examples)")
    priced = any(e.price_input_per_million > 0 or getattr(e, "price_output_per_million", 0) > 0 for e in endpoints)
    if race.budget_unit == "usd" and not priced:
        return ("race.budget_unit=usd: every endpoint of this sweep is priced at 0 (llm.price_input_per_million, "
                "llm.price_output_per_million, embedding.price_input_per_million), so no dollar is ever counted: "
                "set the prices, or give the budget in llm_calls or examples")
    return None


def job_config(config: DictConfig, loader: Any, job: list[str], keep: bool = False) -> tuple[DictConfig, dict]:
    """A job's configuration as the sweeper composes it, without Hydra's settings, and the options it chose.
    ``keep``: a copy as composed is kept for the sweeper to launch, so each job composes once."""
    composed_job = loader.load_sweep_config(config, list(job))
    if keep:
        keep_composed(config, job, copy.deepcopy(composed_job))
    return without_hydra(composed_job)


def without_hydra(composed_job: DictConfig) -> tuple[DictConfig, dict]:
    """A composed job's configuration without Hydra's settings (changed in place), and the options it chose."""
    choices = dict(composed_job.hydra.runtime.choices)
    with open_dict(composed_job):
        composed_job.pop("hydra", None)
    return composed_job, choices


def composition_problem(config: DictConfig, loader: Any, job: list[str], err: Exception) -> str:
    """The line a job that cannot compose ends the sweep with: a ``combination.<setting>`` its combination lacks
    (``-m setup=knn,a_four combination.k=2,4``) says which configuration it changes nothing in; anything else is
    Hydra's message, as the sweeper says it."""
    forced = [f"++{o}" if o.split("=", 1)[0].startswith("combination.") else o for o in job]
    if forced != list(job):
        try:
            with_settings, choices = job_config(config, loader, forced)
            check_combination_settings(with_settings, forced, choices)
        except ValueError as why:
            return f"invalid configuration: {why}"
        except Exception:  # noqa: BLE001 - not that: Hydra's own message below
            pass
    return f"cannot compose the configuration {' '.join(job)}: {one_line(err)}"


def refuse_secrets_before_writing(config: DictConfig) -> None:
    """Before Hydra saves a job's configs (or a sweep's multirun.yaml): a secret in a setting ends the run."""
    try:
        refuse_secrets(config)
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        raise SystemExit(EXIT_USER_ERROR) from None


class Preflight(Callback):
    """When a multirun starts: its base configuration and data checked (a problem exits 2 in one line, before the
    parent run or any job), and the line saying what will run.
    When a single run starts: its settings checked for secrets before Hydra saves them."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        refuse_secrets_before_writing(config)
        if OmegaConf.select(config, "sweep.strategy") == "race":
            log.error("sweep.strategy=race races the configurations of a sweep, and this is one run: add -m and "
                      "two or more values to sweep (opi-eval -m setup=knn,bm25 sweep.strategy=race)")
            raise SystemExit(EXIT_USER_ERROR)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        composed()
        refuse_secrets_before_writing(config)
        note_sweep_folder(config)  # its stores are checked before Hydra knows it (store_checks.separate_stores)
        base = checked_base(config)
        loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
        check_jobs(config, loader)  # every job composes and is valid: checked before the parent run opens
        checked = run_or_explain(prepared, base)
        size, note = planned_sweep(config, loader)
        data = load_data(checked)
        relations = (f"classifier {checked.classifier.name}, gold relations: "
                     f"{checked.relations.gold}" if checked.relations.gold != "none" else
                     "no gold relations (relations.gold=none: no LRCR or OPI)")
        planned = "1 configuration" if size == 1 else f"{size or 'the swept'} configurations"
        log.info("%s on %s (%d examples), reader %s, %s; results to %s%s", planned, data.report.source,
                 len(data.examples), checked.llm.name, relations,
                 f"MLflow experiment {checked.tracking.experiment!r}" if checked.tracking.enabled else
                 "the output folder (tracking=none)", f" ({note})" if note else "")
        start_sweep(size)
