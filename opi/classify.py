"""Logical-relation classifiers: name the relation an answer expresses.

``LocalRelationClassifier`` is a scikit-learn logistic regression over the sentence embeddings of question and
answer. As in the paper it is trained on gold (context, question, answer) -> relation triples and applied to
(retrieved sentences, question, generated answer), but it leaves the text itself out: where one article carries
questions of several relations, the context embedding identifies the article, not the reasoning (it pulled
cross-validated accuracy below chance on deeplogic-130). Question word n-grams are off by default: on deeplogic-v2
they add nothing to cross-validated accuracy (0.490 vs 0.488) but make LRCR follow the question's wording rather
than the answer (question-only LRCR 0.183 vs 0.154; random vs oracle retrieval 0.202 vs 0.245 LRCR with them,
0.161 vs 0.236 without). ``CrossFitted`` labels every example with a model that never saw it: examples are
split into folds by a hash of their id, so the folds, and therefore the trained models, are the same for every
retriever configuration in a sweep.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, Sequence


from opi.relations import UNKNOWN, RelationSet, Triple
from opi.checks import require_number
from opi.schemas import EmbeddingConfig, EmbeddingOverride

__all__ = ["Triple", "TrainingSet", "LocalRelationClassifier", "LLMRelationClassifier", "CrossFitted",
           "parse_relation", "relation_pipeline"]


def __getattr__(name: str) -> Any:
    # the pipeline step lives in opi.relation_features (scikit-learn is imported when a classifier is built, not by
    # every command); models saved before name it here
    if name == "SentenceEmbeddingFeatures":
        from opi.relation_features import SentenceEmbeddingFeatures

        return SentenceEmbeddingFeatures
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class TrainingSet:
    """What a classifier that learns is trained on: labelled gold triples, and whether they are the evaluated data's
    own pool (then cross-fitted: no example is labelled by a model that saw it) or a separate labelled file."""

    ids: Sequence[str]
    triples: Sequence[Triple]
    labels: Sequence[str]
    cross_fit: bool


def fold_of(example_id: str, folds: int) -> int:
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest(), 16) % folds


FAMILIES = ("logreg", "linear_svc")


def relation_pipeline(family: str = "logreg", C: float = 30.0, seed: int = 0,
                      embedding_model: str = EmbeddingConfig.model, device: str = EmbeddingConfig.device,
                      question_words: bool = False, settings: dict | None = None):
    """Question and answer embeddings (+ question word 1-2-grams, TF-IDF, with ``question_words``) -> a linear
    classifier."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.svm import LinearSVC

    from opi.relation_features import SentenceEmbeddingFeatures

    if family not in FAMILIES:
        raise ValueError(f"unknown classifier family {family!r}; use one of {FAMILIES}")
    features = ColumnTransformer([
        *([("question_words", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True), "question")]
          if question_words else []),
        ("question_embedding", SentenceEmbeddingFeatures(embedding_model, device, settings), "question"),
        ("answer_embedding", SentenceEmbeddingFeatures(embedding_model, device, settings), "answer"),
    ])
    model = (LogisticRegression(C=C, max_iter=3000, random_state=seed) if family == "logreg"
             else LinearSVC(C=C / 30, max_iter=20000, random_state=seed))
    return Pipeline([("features", features), ("classifier", model)])


def endpoint_settings(embedding: EmbeddingConfig) -> dict | None:
    """What the features need beyond a model name: an endpoint's settings (a local model is its name and device,
    so a fitted pipeline pickles small and reloads anywhere the model is installed)."""
    if embedding.provider == "sentence-transformers":
        return None
    return dataclasses.asdict(embedding)  # api_key_env too, None for a keyless endpoint: never the default's


def triples_frame(triples: Sequence[Triple]):
    import pandas as pd

    return pd.DataFrame({"text": [t.text for t in triples], "question": [t.question for t in triples],
                         "answer": [t.answer for t in triples]})


class RelationClassifier:
    """What a run asks of a relation classifier; subclass it for one of your own (``classifier._target_``) and
    implement ``predict(triples, progress=None)``, one relation label per triple. Every attribute the run reads has
    its default here; a subclass (usually a dataclass) overrides the ones it has as settings:

    - ``trains``: it learns from labelled triples, ``fit(triples, labels)``; the run cross-fits it on the data's own
      labels (``folds``) or fits it on ``train_path``'s, unless ``registered`` names a fitted model to apply;
    - ``asks_llm``: it takes the run's LLM ``client`` (its replies are kept call by call in the LLM call cache; its
      stage result is not kept whole); ``model``: another model on the same endpoint;
    - an ``embedding`` setting, where it embeds: its own embedding settings over the run's; ``local_models``: the
      names of its settings that name models to load, checked before the run; ``asked_prompt``: the prompt file (under
      ``opi/llm/prompts``) it asks with, whose version tags the run;
    - after ``predict``: ``parse_failures`` (replies it could not read) and ``replies`` (per triple, for traces)."""

    trains: ClassVar[bool] = False
    local_models: ClassVar[tuple[str, ...]] = ()
    name: str = "classifier"
    model: Optional[str] = None
    registered: Optional[str] = None
    train_path: Optional[str] = None
    folds: int = 5
    asked_prompt: Optional[str] = None
    parse_failures: int = 0
    replies: Optional[list] = None

    @property
    def asks_llm(self) -> bool:
        """Sends prompts through the run's LLM endpoint: it takes the ``client`` resource."""
        from opi.components import accepted

        return "client" in accepted(type(self), ["client"])

    def predict(self, triples: Sequence[Triple], progress=None) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} does not implement predict(triples, progress=None)")


@dataclass
class LocalRelationClassifier(RelationClassifier):
    """``relation_pipeline`` behind the fit/predict-on-triples interface; trained on gold triples and applied
    cross-fitted (``folds``), or, given a fitted ``pipeline`` (a registered model), applied as it is."""

    trains: ClassVar[bool] = True
    name: str = "local-clf"
    family: str = "logreg"  # logreg | linear_svc
    C: float = 30.0
    # question word n-grams as features too: they let the classifier name relations from the question's wording
    # alone, which makes LRCR move less with what was retrieved (lrcr_question_only shows how much)
    question_words: bool = False
    folds: int = 5  # cross-fitting: each example is labelled by a model fitted on the other folds
    registered: Optional[str] = None  # a registered model (models:/name@alias): applied as it is, no training
    train_path: Optional[str] = None  # a labelled file (context, question, answer, relation) to train on instead
    seed: int = 0
    # the features' embedding model (unset settings: the run's embedding); at run time, the resolved EmbeddingConfig
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)
    pipeline: Any = field(default=None, repr=False)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        require_number("C", self.C, gt=0)
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2, got {self.folds}")
        self.fitted = self.pipeline is not None

    def fit(self, triples: Sequence[Triple], labels: Sequence[str]) -> "LocalRelationClassifier":
        if len(set(labels)) < 2:
            raise ValueError("the relation classifier needs training examples of at least two relations")
        from opi.embeddings import resolved

        embedding = resolved(EmbeddingConfig(), self.embedding)
        self.pipeline = relation_pipeline(self.family, self.C, self.seed, embedding.model, embedding.device,
                                          self.question_words, endpoint_settings(embedding))
        self.pipeline.fit(triples_frame(triples), list(labels))
        self.fitted = True
        return self

    def predict(self, triples: Sequence[Triple], progress=None) -> list[str]:
        if not self.fitted:
            raise RuntimeError("fit the classifier first")
        return [str(label) for label in self.pipeline.predict(triples_frame(triples))]


class CrossFitted:
    """One classifier per fold, each fitted on the gold pool outside its fold (folds by a hash of the example id):
    an example is labelled by the model that did not see it. Fitted once, it labels any number of triple sets (the
    generated answers of every configuration of a sweep, the question alone, the gold answers). A fold whose
    training part holds a single relation (a small pool) predicts that relation; an empty one, ``unknown``."""

    def __init__(self, make_classifier: Callable[[], Any], pool_ids: Sequence[str], pool: Sequence[Triple],
                 labels: Sequence[str], folds: int = 5):
        from collections import Counter

        self.folds = folds
        pool_fold = [fold_of(i, folds) for i in pool_ids]
        self.models: dict[int, Any] = {}
        for f in range(folds):
            fit_on = [i for i, g in enumerate(pool_fold) if g != f]
            seen = Counter(labels[i] for i in fit_on)
            self.models[f] = (make_classifier().fit([pool[i] for i in fit_on], [labels[i] for i in fit_on])
                              if len(seen) >= 2 else seen.most_common(1)[0][0] if seen else UNKNOWN)

    def predict(self, apply_ids: Sequence[str], apply: Sequence[Triple]) -> list[str]:
        apply_fold = [fold_of(i, self.folds) for i in apply_ids]
        predictions: list[str] = [""] * len(apply_ids)
        for f in sorted(set(apply_fold)):
            held_out = [i for i, g in enumerate(apply_fold) if g == f]
            model = self.models[f]
            labels = [model] * len(held_out) if isinstance(model, str) else model.predict([apply[i] for i in held_out])
            for i, label in zip(held_out, labels):
                predictions[i] = label
        return predictions


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


@dataclass
class LLMRelationClassifier(RelationClassifier):
    """Asks an LLM (base or fine-tuned) for the relation, with a JSON schema whose enum is the label set where the
    server supports structured output. An unparsable reply is asked again ``parse_retries`` times with a reminder,
    then recorded as ``unknown`` (counted as wrong, counted in ``parse_failures``): never NaN, never dropped."""

    trains: ClassVar[bool] = False
    name: str = "llm-clf"
    parse_retries: int = 2
    model: Optional[str] = None  # another model on the same endpoint, e.g. a fine-tuned one (ft:gpt-4o-...)
    finetuned: bool = False  # the model was fine-tuned with opi-train-classifier: ask in its training format
    prompt: str = "relation"
    client: Any = field(default=None, repr=False)
    relation_set: Optional[RelationSet] = field(default=None, repr=False)

    def __post_init__(self):
        if self.finetuned and not self.model:
            raise ValueError("a fine-tuned classifier needs model=<fine-tuned model id>")
        if self.parse_retries < 0:
            raise ValueError(f"parse_retries must be >= 0, got {self.parse_retries}")
        self.parse_failures = 0

    @property
    def asked_prompt(self) -> str:
        return "finetune_system" if self.finetuned else self.prompt  # a fine-tuned model: its training format

    def messages(self, triple: Triple) -> list[dict[str, str]]:
        from opi.llm.prompts import load_prompt
        from opi.llm.reader import format_sentences

        if self.finetuned:
            from opi.llm.finetune import chat_messages

            return chat_messages(triple, self.relation_set)
        definitions = "\n".join(f"- {label}: {text}" for label, text in self.relation_set.definitions.items())
        content = load_prompt(self.prompt).render(definitions=definitions, sentences=format_sentences([triple.text]),
                                                  question=triple.question, answer=triple.answer,
                                                  labels=", ".join(self.relation_set.labels))
        return [{"role": "user", "content": content}]

    def predict(self, triples: Sequence[Triple], progress=None) -> list[str]:
        from opi.llm.client import json_reply_format, object_schema

        labels = self.relation_set.labels
        reply_format = None if self.finetuned else json_reply_format(
            "relation", object_schema(relation={"type": "string", "enum": list(labels)}))
        conversations = [self.messages(t) for t in triples]
        results, failures = self.client.ask_json(
            conversations, reply_format, lambda reply: parse_relation(reply, labels),
            self.parse_retries, 'Reply with only {"relation": "<label>"} using one of: ' + ", ".join(labels), progress)
        self.parse_failures += failures
        record_of = getattr(self.client, "record_of", lambda *_: None)  # a client of your own may keep none
        records = [record_of(c, reply_format) for c in conversations]
        self.replies = [r.content if r is not None else None for r in records]  # the first reply, raw
        return [r if r is not None else UNKNOWN for r in results]


MIN_PER_RELATION = 5  # fewer gold examples of a relation than this, and the classifier cannot learn it


def training_warnings(labels: Sequence[str], cv_accuracy: float | None) -> list[str]:
    """What makes a trained classifier's LRCR meaningless: relations it saw too few times to learn, and a
    cross-validated accuracy no better than guessing the most common relation."""
    from collections import Counter

    counts = Counter(labels)
    warnings = []
    rare = sorted(r for r, n in counts.items() if n < MIN_PER_RELATION)
    if rare:
        warnings.append(f"the relation classifier has fewer than {MIN_PER_RELATION} labelled examples of "
                        f"{len(rare)} of its {len(counts)} relations ({', '.join(rare[:5])}"
                        f"{', ...' if len(rare) > 5 else ''}): it cannot learn them, so LRCR says little; label "
                        "more examples (classifier.train_path) or use classifier=llm")
    if cv_accuracy is not None and counts:
        chance = max(counts.values()) / sum(counts.values())
        if cv_accuracy <= chance:
            warnings.append(f"the relation classifier's cross-validated accuracy ({cv_accuracy:.3f}) is no better "
                            f"than always naming the most common relation ({chance:.3f}): LRCR measures nothing here")
    return warnings
