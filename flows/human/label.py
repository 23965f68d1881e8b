"""People label the relations of a sample of a dataset that has none (``opi-label``), and the labels come back as
a label file (``dataset.labels_path``) and a training file (``classifier.train_path``).

Import validates every row (known id, a label of the set, no repeats, none blank) before writing anything, then
reports how often the configured classifier, applied as a run would apply it, gives the same labels (accuracy and
Cohen's kappa): the classifier's silver labels against people's.
"""
from __future__ import annotations

import logging
import random
from pathlib import Path

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from flows.orchestration import tasks
from flows.orchestration.tasks import StageContext
from flows.run.config import compose_config, typed
from flows.run.data import file_training, load_data
from flows.run.identity import own_embedding
from flows.tracking.registry import resolve_registered
from opi.classify import TrainingSet
from opi.data import DataError
from opi.sheets import read_sheet as read_csv_sheet
from opi.diagnostics import content_words
from opi.relations import Triple
from opi.schemas import OPIConfig
from opi.sentences import split_sentences

log = logging.getLogger("opi")
SHEET_COLUMNS = ["id", "context_excerpt", "question", "answer", "relation"]
EXCERPT_WORDS = 150


def compose(overrides: list[str]) -> OPIConfig:
    """The typed configuration of these overrides (the same composition as opi-eval's)."""
    return typed(compose_config(overrides))


def excerpt(example) -> str:
    """What a labeller reads of the article: the gold evidence where the data has it, else the article sentences
    that share most content words with the question and answer, in article order."""
    if example.evidence:
        return " ".join(example.evidence)
    wanted = content_words(example.question + " " + example.answer)
    sentences = split_sentences(example.context)
    best = sorted(sentences, key=lambda s: -len(content_words(s.text) & wanted))[:4]
    text = " ".join(s.text for s in sorted(best, key=lambda s: s.idx))
    words = text.split()
    return " ".join(words[:EXCERPT_WORDS]) + (" ..." if len(words) > EXCERPT_WORDS else "")


def export(config: OPIConfig, n: int, out: Path, seed: int) -> None:
    data = load_data(config)
    chosen = random.Random(seed).sample(list(data.examples), min(n, len(data.examples)))
    sheet = pd.DataFrame([{"id": e.id, "context_excerpt": excerpt(e), "question": e.question, "answer": e.answer,
                           "relation": ""} for e in chosen], columns=SHEET_COLUMNS)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.to_csv(out, index=False)
    definitions = write_definitions(out, data.relation_set)
    log.info("%s: %d examples to label (definitions: %s)", out, len(sheet), definitions)


def write_definitions(sheet: Path, relation_set) -> Path:
    """``<sheet>.definitions.md``: the relations a labeller chooses from, with their definitions."""
    definitions = sheet.with_suffix(".definitions.md")
    definitions.write_text(f"# The {len(relation_set)} relations ({relation_set.name})\n\nWrite one label per row "
                           "in the relation column: the kind of reasoning the question needs to get from the article "
                           "to the answer.\n\n" + "\n".join(
                               f"- `{label}`: {text}" for label, text in relation_set.definitions.items()) + "\n")
    return definitions


def read_sheet(path: Path, known: dict, labels: list[str]) -> pd.DataFrame:
    """The filled sheet, every row checked; a DataError names the first bad row and field."""
    sheet = read_csv_sheet(path, ["id", "relation"], "opi-label export")
    seen: set[str] = set()
    for row_number, (example_id, relation) in enumerate(zip(sheet["id"], sheet["relation"]), start=2):
        where = f"{path}, row {row_number}"
        if example_id not in known:
            raise DataError(f"{where}, field 'id': {example_id!r} is not an example of this dataset")
        if example_id in seen:
            raise DataError(f"{where}, field 'id': {example_id!r} labelled twice")
        seen.add(example_id)
        if relation.strip() not in labels:
            raise DataError(f"{where}, field 'relation': {relation!r} is not one of {labels}")
    return sheet.assign(relation=sheet["relation"].str.strip())


def silver_labels(config: OPIConfig, examples, labels: list[str]) -> list[str]:
    """The configured classifier's labels of these gold triples, as a run would get them: an LLM or a registered
    model as they are, a classifier that learns cross-fitted on people's labels (or trained on its train_path)."""
    triples = [Triple(e.context, e.question, e.answer) for e in examples]
    ids = [e.id for e in examples]
    training = TrainingSet(ids, triples, labels, cross_fit=True)
    if config.classifier.train_path:
        training = file_training(config.classifier.train_path, config.relations.set)
    context = StageContext(own_embedding(config, config.classifier), config.relations.set, config.seed,
                           config.paths.llm_cache)  # the classifier's own embedding over the run's, as runs use it
    result = tasks.classify.fn(config.classifier, config.llm, training, ids, triples, context,
                               resolve_registered(config))
    return result.predicted


def import_sheet(config: OPIConfig, sheet_path: Path, out: Path) -> None:
    data = load_data(config)
    known = {e.id: e for e in data.pool}
    sheet = read_sheet(sheet_path, known, data.relation_set.labels)
    out.parent.mkdir(parents=True, exist_ok=True)
    label_file = sheet[["id", "relation"]]
    if sheet["id"].str.fullmatch(r"[0-9]+").all():  # ids are row numbers (RAG-Dataset-12000): joinable by row too
        label_file = label_file.assign(row=sheet["id"])
    label_file.to_csv(out, index=False)
    examples = [known[i] for i in sheet["id"]]
    train = out.with_suffix(".train.jsonl")
    pd.DataFrame([{"id": e.id, "context": e.context, "question": e.question, "answer": e.answer, "relation": r}
                  for e, r in zip(examples, sheet["relation"])]).to_json(train, orient="records", lines=True)
    partly = "" if len(sheet) == len(data.pool) else " dataset.on_invalid=skip"  # evaluates the labelled ones
    log.info("%s: %d labels of the %d examples (dataset.labels_path=%s%s); %s: the labelled examples "
             "(classifier.train_path=%s)", out, len(sheet), len(data.pool), out, partly, train, train)
    people = sheet["relation"].tolist()
    if len(set(people)) < 2:
        log.warning("all labels are %r: no classifier agreement to measure", people[0])
        return
    silver = silver_labels(config, examples, people)
    accuracy = sum(a == b for a, b in zip(people, silver)) / len(people)
    log.info("agreement of the classifier %s with people on %d examples: accuracy %.3f, Cohen's kappa %.3f "
             "(chance accuracy %.3f)", config.classifier.name, len(people), accuracy,
             cohen_kappa_score(people, silver), 1 / len(data.relation_set))
