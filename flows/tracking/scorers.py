"""OPI's metrics as MLflow 3 GenAI scorers, for a RAG app you already evaluate with ``mlflow.genai.evaluate``.

    result = mlflow.genai.evaluate(data=rows, scorers=[BertSim(), RelationCorrect(llm=llm)])
    metrics, per_relation = opi_from_results(result)  # BERTSim, LRCR, OPI(β) pooled (Formula 3) and mean

A row's ``inputs`` hold "question" (and optionally "context"), its ``outputs`` the answer (a string, or a dict with
"response" or "answer") and its ``expectations`` "expected_response" and "gold_relation". Every value is computed by
``opi``'s own code, as an OPI run computes it; ``llm`` is an ``opi.schemas.LLMConfig`` (an OpenAI-compatible endpoint).
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import pandas as pd
from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback, SpanType
from mlflow.genai.scorers import Scorer
from pydantic import Field, PrivateAttr, model_validator

from opi.classify import LLMRelationClassifier, LocalRelationClassifier
from opi.embeddings import embedder_for
from opi.llm.cache import CallCache
from opi.llm.client import ChatClient
from opi.metrics import correctness
from opi.metrics.extrinsic import LLMJudge
from opi.metrics.names import BERTSIM
from opi.metrics.opi import PAPER_BETAS, cosine_rows, summary
from opi.relations import UNKNOWN, Triple, load_relation_set
from opi.schemas import EmbeddingConfig, LLMConfig

__all__ = ["BertSim", "RelationCorrect", "AnswerCorrectness", "Judge037", "opi_from_results", "similarity"]


def _answer(outputs: Any) -> str:
    if isinstance(outputs, str):
        return outputs
    for key in ("response", "answer"):
        if isinstance(outputs, dict) and isinstance(outputs.get(key), str):
            return outputs[key]
    raise ValueError(f"outputs must be the answer or a dict with 'response' or 'answer', got {type(outputs).__name__}")


def _question(inputs: Any) -> str:
    if isinstance(inputs, str):
        return inputs
    for key in ("question", "query"):
        if isinstance(inputs, dict) and isinstance(inputs.get(key), str):
            return inputs[key]
    raise ValueError("inputs must be the question or a dict with 'question' or 'query'")


def _expected(expectations: dict | None, key: str) -> Any:
    if not expectations or expectations.get(key) is None:
        raise ValueError(f"this scorer needs expectations[{key!r}]")
    return expectations[key]


def _context(inputs: Any, trace) -> str:
    """``inputs["context"]``; else the documents of the trace's RETRIEVER spans (those not inside another one), in
    order, joined as OPI joins retrieved sentences; else ''."""
    if isinstance(inputs, dict) and isinstance(inputs.get("context"), str):
        return inputs["context"]
    if trace is None or trace.data is None:
        return ""
    spans = trace.search_spans(span_type=SpanType.RETRIEVER)
    parent_of = {span.span_id: span.parent_id for span in trace.data.spans}
    retrievers = {span.span_id for span in spans}

    def nested(span) -> bool:
        parent = span.parent_id
        while parent and parent not in retrievers:
            parent = parent_of.get(parent)
        return bool(parent)

    documents = [d for span in spans if not nested(span) for d in (span.outputs or [])]
    return " ".join(str(d.get("page_content", d.get("content", "")) if isinstance(d, dict)
                        else getattr(d, "page_content", d)) for d in documents)


def similarity(expected: str, generated: str, embedding: EmbeddingConfig) -> float:
    """BERTSim of one answer: the cosine of the two answers' embeddings, as an OPI run's ``answer-similarity``
    (0 for a blank answer)."""
    if not generated.strip():
        return 0.0
    embedder = embedder_for(embedding)
    return float(cosine_rows(embedder.encode([expected], normalize=False),
                             embedder.encode([generated], normalize=False))[0])


class BertSim(Scorer):
    """The cosine of the expected and the generated answer's embeddings by ``embedding`` (OPI's yardstick)."""

    name: str = BERTSIM
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)

    def __call__(self, *, outputs: Any = None, expectations: dict | None = None) -> Feedback:
        value = similarity(_expected(expectations, "expected_response"), _answer(outputs), self.embedding)
        return Feedback(value=value, rationale=f"cosine {value:.4f} between the expected and the generated answer's "
                                               f"embeddings ({self.embedding.model})")


class _AsksLLM(Scorer):
    """A scorer that asks ``llm``; ``llm_cache``: OPI's call cache (an SQLite file), so a rerun pays nothing twice."""

    llm: LLMConfig | None = None
    llm_cache: str | None = None
    parse_retries: int = 2
    _client: ChatClient | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _chat(self) -> ChatClient:
        with self._lock:  # one client (and connection pool) for the rows scored in parallel
            if self._client is None:
                self._client = ChatClient(self.llm, CallCache(self.llm_cache) if self.llm_cache else None)
            return self._client

    def _source(self) -> AssessmentSource:
        return AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=self.llm.model)


class RelationCorrect(_AsksLLM):
    """Whether the relation a classifier names for (context, question, generated answer) is ``gold_relation``: True
    or False (its mean over rows is LRCR). The classifier is OPI's LLM classifier asking ``llm`` (labels of
    ``relation_set``) or a ``registered`` scikit-learn one (``models:/name/version``)."""

    name: str = "relation_correct"
    registered: str | None = None
    relation_set: str = "paper13"
    _pipeline: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_classifier(self):
        if (self.llm is None) == (self.registered is None):
            raise ValueError("RelationCorrect needs exactly one of llm=LLMConfig(...) or registered='models:/...'")
        return self

    def _classifier(self):
        if self.registered is None:
            return LLMRelationClassifier(client=self._chat(), relation_set=load_relation_set(self.relation_set),
                                         parse_retries=self.parse_retries)
        with self._lock:
            if self._pipeline is None:
                import mlflow.sklearn  # here: scikit-learn only where a registered classifier is asked for

                self._pipeline = mlflow.sklearn.load_model(self.registered)
        return LocalRelationClassifier(pipeline=self._pipeline)

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: dict | None = None,
                 trace=None) -> Feedback:
        gold = _expected(expectations, "gold_relation")
        triple = Triple(_context(inputs, trace), _question(inputs), _answer(outputs))
        (predicted,) = self._classifier().predict([triple])
        note = " (the LLM's reply named no relation: counted as wrong)" if predicted == UNKNOWN else ""
        source = (self._source() if self.registered is None
                  else AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=self.registered))
        return Feedback(value=predicted == gold, source=source,
                        rationale=f"predicted relation {predicted!r}, gold {gold!r}{note}",
                        metadata={"predicted_relation": predicted, "gold_relation": str(gold)})


class AnswerCorrectness(_AsksLLM):
    """RAGAS-style answer correctness (OPI's ``opi.metrics.correctness``): statement F1 by ``llm`` blended with the
    BERTSim similarity by ``embedding`` (``weights``; with ``threshold``, the similarity counts as 0 or 1)."""

    name: str = "answer_correctness"
    llm: LLMConfig
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    weights: tuple[float, float] = (0.75, 0.25)
    threshold: float | None = None

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: dict | None = None) -> Feedback:
        truth, answer = _expected(expectations, "expected_response"), _answer(outputs)
        cosine = similarity(truth, answer, self.embedding)
        scorer = correctness.AnswerCorrectness(self._chat(), self.weights, self.threshold, self.parse_retries)
        result = scorer.score(_question(inputs), answer, truth, cosine)
        if result.score is None:
            return Feedback(error=f"answer correctness: {result.failure} after {self.parse_retries} retries",
                            source=self._source())
        return Feedback(value=result.score, source=self._source(),
                        rationale=f"statement F1 {result.f1:.4f} (TP {result.tp}, FP {result.fp}, FN {result.fn}) "
                                  f"and similarity {cosine:.4f}, weighted {self.weights[0]:g}:{self.weights[1]:g}",
                        metadata={"f1": str(result.f1), "similarity": str(cosine)})


class Judge037(_AsksLLM):
    """The paper's extrinsic check by an LLM judge (``opi.metrics.extrinsic.LLMJudge``): 0, 3 or 7."""

    name: str = "judge_037"
    llm: LLMConfig

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: dict | None = None) -> Feedback:
        judge = LLMJudge(self._chat(), self.parse_retries)
        (score,) = judge.score([_question(inputs)], [_expected(expectations, "expected_response")], [_answer(outputs)])
        if score is None:
            return Feedback(error=f"the judge's reply held no score of 0, 3 or 7 after {self.parse_retries} retries",
                            source=self._source())
        return Feedback(value=score, source=self._source(),
                        rationale=f"{score} on the 0-3-7 scale: {judge.reasons[0] or 'the judge gave no reason'}")


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    for column in (f"{name}/value", name):
        if column in frame:
            return frame[column]
    raise ValueError(f"the results have no column {name!r} or {name + '/value'!r}")


def opi_from_results(results, relations: Sequence[str] | None = None, betas: Sequence[float] = PAPER_BETAS, *,
                     bertsim: str = BERTSIM, correct: str = "relation_correct", gold: str = "gold_relation"
                     ) -> tuple[dict[str, float], pd.DataFrame]:
    """BERTSim, LRCR and OPI(β) per relation and overall (``opi.metrics.opi.summary``: ``opi_<β>`` the pooled
    Formula 3, ``opi_<β>_mean`` the mean of per-relation OPIs) from ``mlflow.genai.evaluate``'s per-row results (an
    ``EvaluationResult``, its ``result_df``, or any frame with these columns, bare or as ``<name>/value``).

    ``relations``: the label set (default: the gold relations present). Rows missing a value (a scorer's error)
    are left out and counted in ``rows_left_out``. LRCR asks only whether each prediction was right: a wrong one
    stands in the rows as no relation (None)."""
    frame = getattr(results, "result_df", results)
    rows = pd.DataFrame({"relation": _column(frame, gold), "similarity": _column(frame, bertsim),
                         "correct": _column(frame, correct)})
    kept = rows.dropna()
    gold_relations = kept["relation"].astype(str)
    right = [c.strip().lower() in ("true", "yes") if isinstance(c, str) else bool(c) for c in kept["correct"]]
    rows = pd.DataFrame({"relation": gold_relations, "similarity": kept["similarity"].astype(float),
                         "predicted_relation": [r if ok else None for r, ok in zip(gold_relations, right)]})
    metrics, table = summary(rows, sorted(set(rows["relation"])) if relations is None else relations, betas)
    return {**metrics, "rows_left_out": float(len(frame) - len(kept))}, table
