"""A configuration's data, read and validated once per process (the jobs of a sweep share it), and what its relation
classifier is trained on."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from flows.orchestration.hashing import HashedList, hashed
from opi.classify import TrainingSet
from opi.data import SKIP_HINT, DataError, Example, LoadReport, labelled, load_examples, select
from opi.relations import RelationSet, Triple, load_relation_set
from opi.racing import in_rounds
from opi.schemas import DatasetConfig, OPIConfig

log = logging.getLogger("opi")
ROUND_SETTINGS = ("rounds", "rounds_from", "rounds_to")  # a race's part of the dataset (sweep.strategy=race)


@dataclass(frozen=True)
class Data:
    """A configuration's data, validated; the parts every stage task receives are hashed once."""

    relation_set: RelationSet
    examples: HashedList  # the evaluated examples
    pool: list[Example]  # the whole source, unfiltered
    report: LoadReport
    contexts: HashedList  # the pool's distinct articles, sorted
    labelled: str  # all | some | none of the examples carry a relation label

    @cached_property  # every job of a sweep asks for it, more than once: built and hashed once per dataset
    def pool_training(self) -> TrainingSet:
        # an unfiltered dataset's triples say no more than its examples: their hash is derived, not taken again
        # (~1 s at 12,000 rows)
        return training_set(self.pool, cross_fit=True,
                            content_hash=f"triples-of-{self.examples.content_hash}" if self.pool == self.examples
                            else None)


def load_data(config: OPIConfig) -> Data:
    key = {"dataset": dataclasses.asdict(config.dataset), "relations": config.relations.set, "seed": config.seed}
    return _load_data(json.dumps(key, sort_keys=True))


@lru_cache(maxsize=16)  # a race's jobs each evaluate a part of one dataset (its rounds): read it once for them all
def _load_data(key: str) -> Data:
    settings = json.loads(key)
    dataset = DatasetConfig(**settings["dataset"])
    whole_settings = {**settings["dataset"], **{field.name: field.default for field in dataclasses.fields(DatasetConfig)
                                                if field.name in ROUND_SETTINGS}}  # as a grid's job has them
    data = _whole_data(json.dumps({**settings, "dataset": whole_settings}, sort_keys=True))
    if dataset.rounds is not None:  # a race's rounds (sweep.strategy=race)
        examples = in_rounds(data.examples, dataset.rounds, dataset.rounds_from, dataset.rounds_to or dataset.rounds,
                             settings["seed"])
        data = dataclasses.replace(data, examples=hashed(examples))
    log.info("%s; evaluating %d examples", data.report.describe(), len(data.examples))
    return data


@lru_cache(maxsize=4)  # jobs of one multirun share the dataset: read, validate and hash it once
def _whole_data(key: str) -> Data:
    settings = json.loads(key)
    dataset, relation_set = DatasetConfig(**settings["dataset"]), load_relation_set(settings["relations"])
    pool, report = load_examples(dataset, relation_set.labels, settings["seed"], filtered=False)  # read once
    for note in report.notes:
        log.warning("%s", note)
    examples = select(pool, dataset.relations, dataset.sample, dataset.limit, settings["seed"])
    return Data(relation_set, hashed(examples), pool, report, hashed(sorted({e.context for e in pool})),
                labelled(pool))


def training_set(examples: list[Example], cross_fit: bool, content_hash: str | None = None) -> TrainingSet:
    return TrainingSet([e.id for e in examples], hashed([Triple(e.context, e.question, e.answer) for e in examples],
                                                        content_hash), [e.relation for e in examples], cross_fit)


@lru_cache(maxsize=4)  # read, validated, built and hashed once per label file
def file_training(path: str, relation_set: str) -> TrainingSet:
    """The labelled file a classifier is trained on (``classifier.train_path``): every row needs a label."""
    try:
        examples, _ = load_examples(DatasetConfig(kind="table", path=path), load_relation_set(relation_set).labels)
    except DataError as err:  # dataset.on_invalid is the evaluated data's: a training file's rows are all used
        raise DataError(f"{str(err).replace(SKIP_HINT, '')} (classifier.train_path: fix the row)") from None
    if labelled(examples) != "all":
        raise DataError(f"{path} (classifier.train_path): every row needs a relation label")
    return training_set(examples, cross_fit=False)


def training_for(config: OPIConfig, data: Data) -> TrainingSet | None:
    """The classifier's training data, or None when it does not learn (or cannot: no labels anywhere)."""
    classifier = config.classifier
    if not classifier.trains or classifier.registered:
        return None
    if classifier.train_path:
        training, source = file_training(classifier.train_path, config.relations.set), classifier.train_path
    elif data.labelled == "all":
        training, source = data.pool_training, data.report.source
    else:
        return None
    relations = sorted(set(training.labels))
    if len(relations) < 2:
        raise DataError(f"the classifier {classifier.name} learns to tell relations apart, and {source} has only "
                        f"one ({relations[0]!r}): label examples of at least two relations, or choose "
                        "classifier=llm, or relations.gold=none")
    return training


def training_key(training: TrainingSet | None) -> Any:
    """What a configuration's result depends on of its classifier's training data."""
    return None if training is None else (list(training.ids), training.triples.content_hash, list(training.labels))
