"""Logical-relation label sets (LR): the categories of reasoning a question needs.

A label set is data, not code: a YAML file with ``labels: {label: definition}``. The packaged ``paper13`` set is
the default; any other file can be named instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

UNKNOWN = "unknown"  # recorded when a classifier cannot name a relation; always counted as wrong


@dataclass(frozen=True)
class Triple:
    """What a relation classifier reads: the text (an article, or retrieved sentences), a question, an answer."""
    text: str
    question: str
    answer: str


@dataclass(frozen=True)
class RelationSet:
    name: str
    definitions: dict[str, str]

    @property
    def labels(self) -> list[str]:
        return list(self.definitions)

    def __contains__(self, label: str) -> bool:
        return label in self.definitions

    def __len__(self) -> int:
        return len(self.definitions)


def load_relation_set(name_or_path: str = "paper13") -> RelationSet:
    """Load a packaged set by name (``paper13``) or any YAML file by path."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"} and path.exists():
        text = path.read_text(encoding="utf-8")
    else:
        packaged = resources.files("opi") / "relation_sets" / f"{name_or_path}.yaml"
        if not packaged.is_file():
            raise ValueError(f"unknown relation set {name_or_path!r}: give a packaged name (paper13) or a .yaml path")
        text = packaged.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    labels = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(labels, dict) or not labels:
        raise ValueError(f"relation set {name_or_path!r} must have a non-empty 'labels' mapping of label -> definition")
    if UNKNOWN in labels:
        raise ValueError(f"relation set {name_or_path!r}: {UNKNOWN!r} is reserved for unclassifiable answers")
    return RelationSet(name=str(data.get("name", path.stem)), definitions={str(k): str(v) for k, v in labels.items()})


def gold_source(requested: str | None, labelled: str, can_label: bool, classifier: str, source: str
                ) -> tuple[str, str | None]:
    """Where gold relations come from: (``labels`` | ``classifier`` | ``none``, a notice for the user or None).

    ``requested``: ``relations.gold`` (None = choose); ``labelled``: ``all``/``some``/``none`` of the data's
    examples carry a label; ``can_label``: the configured classifier can label the gold triples (an LLM, a
    registered model, a local one given a labelled training file, or one cross-fitted on the data's own labels).
    Raises ValueError when the request cannot be met.
    """
    needs = (f"the classifier {classifier} learns from labelled examples: give it a labelled file "
             "(classifier.train_path=...) or a registered model (classifier.registered=...), or use classifier=llm")
    if labelled == "some" and requested not in ("none", "classifier"):
        raise ValueError(f"{source}: some rows have a relation label and some do not; label all of them (a label "
                         "file: dataset.labels_path), or set relations.gold=classifier or none")
    if requested == "labels" and labelled != "all":
        raise ValueError(f"relations.gold=labels, but {source} has no relation labels: give a label file "
                         "(dataset.labels_path), or set relations.gold=classifier or none")
    if requested == "classifier" and not can_label:
        unlabelled = "labels only some of its rows" if labelled == "some" else "has no relation labels"
        raise ValueError(f"relations.gold=classifier, but {source} {unlabelled} and {needs}")
    if requested is not None:
        return requested, None
    if labelled == "all":
        return "labels", None
    if can_label:
        return "classifier", (f"{source} has no relation labels: the classifier {classifier} labels each gold "
                              "(context, question, answer) triple, as the paper does (relations.gold=classifier)")
    return "none", (f"{source} has no relation labels, and {needs}. Running without gold relations "
                    "(relations.gold=none): BERTSim and the retrieval diagnostics are computed, LRCR and OPI are not")
