"""Logical-relation classifiers: name the relation an answer expresses.

``LocalRelationClassifier`` is a scikit-learn logistic regression over the question's word 1-2-grams (TF-IDF) and
the sentence embeddings of question and answer. As in the paper it is trained on gold (context, question, answer)
-> relation triples and applied to (retrieved sentences, question, generated answer), but it leaves the text
itself out: in a set where one article carries questions of several relations (the bundled one has five per
article), the context embedding identifies the article, not the reasoning, and pulled cross-validated accuracy
below chance (5 % vs 7.7 % on deeplogic-130); question + answer features reach about 47 %. ``cross_fit_predict`` labels
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

    def __init__(self, embedder, C: float = 30.0, max_iter: int = 3000, seed: int = 0):
        self.embedder = embedder
        self.C, self.max_iter, self.seed = C, max_iter, seed
        self.model = None
        self.words = None

    def features(self, triples: Sequence[Triple]):
        from scipy.sparse import csr_matrix, hstack

        questions = [t.question for t in triples]
        dense = np.hstack([self.embedder.encode(questions), self.embedder.encode([t.answer for t in triples])])
        return hstack([self.words.transform(questions), csr_matrix(dense)]).tocsr()

    def fit(self, triples: Sequence[Triple], labels: Sequence[str]) -> "LocalRelationClassifier":
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        if len(set(labels)) < 2:
            raise ValueError("the relation classifier needs training examples of at least two relations")
        self.words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit([t.question for t in triples])
        self.model = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.seed)
        self.model.fit(self.features(triples), list(labels))
        return self

    def predict(self, triples: Sequence[Triple]) -> list[str]:
        if self.model is None:
            raise RuntimeError("fit the classifier first")
        return [str(label) for label in self.model.predict(self.features(triples))]


def cross_fit_predict(make_classifier, pool_ids: Sequence[str], pool: Sequence[Triple], labels: Sequence[str],
                      apply_ids: Sequence[str], apply: Sequence[Triple], folds: int = 5) -> list[str]:
    """Label ``apply[i]`` with a classifier fitted on the gold ``pool`` triples outside ``apply_ids[i]``'s fold.

    The pool is typically the whole labelled dataset; folds come from a hash of the id, so an example is never
    labelled by a model that saw it, and the same models serve every configuration of a sweep.
    """
    pool_fold = [fold_of(i, folds) for i in pool_ids]
    apply_fold = [fold_of(i, folds) for i in apply_ids]
    predictions: list[str] = [""] * len(apply_ids)
    for f in sorted(set(apply_fold)):
        fit_on = [i for i, g in enumerate(pool_fold) if g != f]
        classifier = make_classifier().fit([pool[i] for i in fit_on], [labels[i] for i in fit_on])
        held_out = [i for i, g in enumerate(apply_fold) if g == f]
        for i, label in zip(held_out, classifier.predict([apply[i] for i in held_out])):
            predictions[i] = label
    return predictions


def cross_validated_accuracy(make_classifier, ids, triples, labels, folds: int = 5) -> float:
    """Accuracy of the classifier on gold triples, each predicted by a model that did not see it."""
    predicted = cross_fit_predict(make_classifier, ids, triples, labels, ids, triples, folds)
    return float(np.mean([p == g for p, g in zip(predicted, labels)]))
