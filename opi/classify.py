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
from sklearn.base import BaseEstimator, TransformerMixin


@dataclass(frozen=True)
class Triple:
    text: str
    question: str
    answer: str


def fold_of(example_id: str, folds: int) -> int:
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest(), 16) % folds


class SentenceEmbeddingFeatures(TransformerMixin, BaseEstimator):
    """A scikit-learn transformer: texts -> unit sentence embeddings from the shared (cached) embedder.

    It stores only the model's name, so a fitted pipeline pickles small and reloads anywhere the model is installed.
    """

    def __init__(self, model: str = "packaged:all-MiniLM-L6-v2", device: str = "cpu"):
        self.model = model
        self.device = device

    def fit(self, texts, y=None) -> "SentenceEmbeddingFeatures":
        return self

    def transform(self, texts) -> np.ndarray:
        from opi.embeddings import shared_embedder

        return shared_embedder(self.model, self.device).encode([str(t) for t in texts])


FAMILIES = ("logreg", "linear_svc")


def relation_pipeline(family: str = "logreg", C: float = 30.0, seed: int = 0,
                      embedding_model: str = "packaged:all-MiniLM-L6-v2", device: str = "cpu"):
    """Question word 1-2-grams (TF-IDF) + question and answer embeddings -> a linear classifier."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.svm import LinearSVC

    if family not in FAMILIES:
        raise ValueError(f"unknown classifier family {family!r}; use one of {FAMILIES}")
    features = ColumnTransformer([
        ("question_words", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True), "question"),
        ("question_embedding", SentenceEmbeddingFeatures(embedding_model, device), "question"),
        ("answer_embedding", SentenceEmbeddingFeatures(embedding_model, device), "answer"),
    ])
    model = (LogisticRegression(C=C, max_iter=3000, random_state=seed) if family == "logreg"
             else LinearSVC(C=C / 30, max_iter=20000, random_state=seed))
    return Pipeline([("features", features), ("classifier", model)])


def triples_frame(triples: Sequence[Triple]):
    import pandas as pd

    return pd.DataFrame({"text": [t.text for t in triples], "question": [t.question for t in triples],
                         "answer": [t.answer for t in triples]})


class LocalRelationClassifier:
    """``relation_pipeline`` behind the fit/predict-on-triples interface the evaluation uses."""

    name = "local"

    def __init__(self, family: str = "logreg", C: float = 30.0, seed: int = 0,
                 embedding_model: str = "packaged:all-MiniLM-L6-v2", device: str = "cpu", pipeline=None):
        self.pipeline = pipeline or relation_pipeline(family, C, seed, embedding_model, device)
        self.fitted = pipeline is not None

    def fit(self, triples: Sequence[Triple], labels: Sequence[str]) -> "LocalRelationClassifier":
        if len(set(labels)) < 2:
            raise ValueError("the relation classifier needs training examples of at least two relations")
        self.pipeline.fit(triples_frame(triples), list(labels))
        self.fitted = True
        return self

    def predict(self, triples: Sequence[Triple]) -> list[str]:
        if not self.fitted:
            raise RuntimeError("fit the classifier first")
        return [str(label) for label in self.pipeline.predict(triples_frame(triples))]


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


def parse_relation(reply: str, labels: Sequence[str]) -> str | None:
    """A label from a reply: JSON ``{"relation": label}`` (possibly inside other text) or the bare label; else None."""
    import json
    import re

    text = reply.strip()
    candidates = [text] + re.findall(r"\{[^{}]*\}", text)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict) and value.get("relation") in labels:
            return value["relation"]
    bare = text.strip("`'\" .").lower()
    return bare if bare in labels else None


class LLMRelationClassifier:
    """Asks an LLM (base or fine-tuned) for the relation, with a JSON schema whose enum is the label set where the
    server supports structured output. An unparsable reply is asked again ``parse_retries`` times with a reminder,
    then recorded as ``unknown`` (counted as wrong, counted in ``parse_failures``): never NaN, never dropped."""

    name = "llm"

    def __init__(self, client, relation_set, parse_retries: int = 2, prompt_name: str = "relation",
                 finetuned: bool = False):
        from opi.llm.prompts import load_prompt

        self.finetuned = finetuned  # a fine-tuned model gets its training format (opi.llm.finetune.chat_messages)
        self.client = client
        self.relations = relation_set
        self.parse_retries = parse_retries
        self.prompt = load_prompt(prompt_name)
        self.parse_failures = 0
        self.schema = {"type": "json_schema", "json_schema": {"name": "relation", "strict": True, "schema": {
            "type": "object", "additionalProperties": False, "required": ["relation"],
            "properties": {"relation": {"type": "string", "enum": list(relation_set.labels)}}}}}

    def messages(self, triple: Triple) -> list[dict[str, str]]:
        from opi.llm.reader import format_sentences

        if self.finetuned:
            from opi.llm.finetune import chat_messages

            return chat_messages(triple, self.relations)
        definitions = "\n".join(f"- {label}: {text}" for label, text in self.relations.definitions.items())
        content = self.prompt.render(definitions=definitions, sentences=format_sentences([triple.text]),
                                     question=triple.question, answer=triple.answer,
                                     labels=", ".join(self.relations.labels))
        return [{"role": "user", "content": content}]

    def predict(self, triples: Sequence[Triple], progress=None) -> list[str]:
        from opi.relations import UNKNOWN

        labels = self.relations.labels
        conversations = [self.messages(t) for t in triples]
        result: list[str | None] = [None] * len(triples)
        for attempt in range(self.parse_retries + 1):
            todo = [i for i, r in enumerate(result) if r is None]
            if not todo:
                break
            schema = None if self.finetuned else self.schema
            replies = self.client.complete_many([(conversations[i], schema) for i in todo],
                                                progress if attempt == 0 else None)
            for i, reply in zip(todo, replies):
                result[i] = parse_relation(reply, labels)
                if result[i] is None:
                    conversations[i] = conversations[i] + [
                        {"role": "assistant", "content": reply},
                        {"role": "user", "content": 'Reply with only {"relation": "<label>"} using one of: '
                                                    + ", ".join(labels)}]
        self.parse_failures += sum(r is None for r in result)
        return [r if r is not None else UNKNOWN for r in result]
