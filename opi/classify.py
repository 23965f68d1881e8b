"""Logical-relation classifiers: name the relation an answer expresses.

``LocalRelationClassifier`` is a scikit-learn logistic regression over sentence embeddings of
(text, question, answer), concatenated. As in the paper it is trained on gold (context, question, answer) ->
relation triples and applied to (retrieved sentences, question, generated answer). ``cross_fit_predict`` labels
every example with a model that never saw it: examples are split into folds by a hash of their id, so the folds,
and therefore the trained models, are the same for every retriever configuration in a sweep.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Triple:
    text: str
    question: str
    answer: str


def fold_of(example_id: str, folds: int) -> int:
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest(), 16) % folds


class LocalRelationClassifier:
    name = "local"

    def __init__(self, embedder, C: float = 1.0, max_iter: int = 2000, seed: int = 0):
        self.embedder = embedder
        self.C, self.max_iter, self.seed = C, max_iter, seed
        self.model = None

    def features(self, triples: Sequence[Triple]) -> np.ndarray:
        parts = [self.embedder.encode([getattr(t, part) for t in triples]) for part in ("text", "question", "answer")]
        return np.hstack(parts)

    def fit(self, triples: Sequence[Triple], labels: Sequence[str]) -> "LocalRelationClassifier":
        from sklearn.linear_model import LogisticRegression

        if len(set(labels)) < 2:
            raise ValueError("the relation classifier needs training examples of at least two relations")
        self.model = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.seed)
        self.model.fit(self.features(triples), list(labels))
        return self

    def predict(self, triples: Sequence[Triple]) -> list[str]:
        if self.model is None:
            raise RuntimeError("fit the classifier first")
        return [str(label) for label in self.model.predict(self.features(triples))]


def cross_fit_predict(make_classifier, ids: Sequence[str], train: Sequence[Triple], labels: Sequence[str],
                      apply: Sequence[Triple], folds: int = 5) -> list[str]:
    """Predict ``apply[i]`` with a classifier fitted on the gold ``train`` triples of the other folds."""
    fold = [fold_of(i, folds) for i in ids]
    predictions: list[str | None] = [None] * len(ids)
    for f in sorted(set(fold)):
        held_out = [i for i, g in enumerate(fold) if g == f]
        fit_on = [i for i, g in enumerate(fold) if g != f]
        classifier = make_classifier().fit([train[i] for i in fit_on], [labels[i] for i in fit_on])
        for i, label in zip(held_out, classifier.predict([apply[i] for i in held_out])):
            predictions[i] = label
    return predictions  # type: ignore[return-value]


def cross_validated_accuracy(make_classifier, ids, triples, labels, folds: int = 5) -> float:
    """Accuracy of the classifier on gold triples, each predicted by a model that did not see it."""
    predicted = cross_fit_predict(make_classifier, ids, triples, labels, triples, folds)
    return float(np.mean([p == g for p, g in zip(predicted, labels)]))
