"""The stages: the ``opi`` work at batch granularity, each declared once (``flows.orchestration.stage``) with what
its cache key covers, whether its result is kept and what its time counts as; ``STAGES`` is the table of them.

A stage's key covers its inputs and the source it depends on (the ``opi`` modules it calls, the modules of the
components it builds, and this file), so an edit in a module a stage runs computes it again and an edit elsewhere
does not. Stages receive the typed configs and built components (``opi.schemas``, ``opi.components``); the cache keys
them by their settings (``flows.orchestration.hashing.key_of``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.orchestration.hashing import content_hash, key_of
from flows.orchestration.clients import client_for, progress_bar
from flows.orchestration.results import Answers, Classified, Quality, Reranked
from flows.orchestration.stage import Stage, stage
from opi import components
from opi.articles import StoreArticles, prepare_articles
from opi.articles import store_articles as articles_of_store
from opi.classify import CrossFitted, TrainingSet
from opi.embeddings import embedder_for, run_store
from opi.metrics.correctness import AnswerCorrectness
from opi.metrics.extrinsic import LLMJudge
from opi.memory import MEMORY
from opi.metrics.opi import cosine_rows
from opi.relations import Triple, load_relation_set
from opi.report import build_report
from opi.rerankers import rerank_examples
from opi.retrieval import rank_examples
from opi.schemas import ChunkingConfig, EmbeddingConfig, LLMConfig, MetricsConfig

@dataclass(frozen=True)
class StageContext:
    """What the relation stages need besides their inputs: the classifier's embedding model (resolved against the
    run's), label set, seed and LLM call cache."""

    embedding: EmbeddingConfig
    relation_set: str
    seed: int
    llm_cache: str


@dataclass(frozen=True)
class RegisteredModel:
    """A model from the MLflow registry: ``uri`` (``models:/name/version``) and where its files are."""

    uri: str
    location: str


@stage("chunk-articles", counted_as="chunking", uses=("opi.articles",))
def chunk_articles(contexts: list[str], chunking: ChunkingConfig, language: str):
    return prepare_articles(contexts, chunking.size, chunking.overlap, chunking.length, language, store=run_store())


@stage("store-articles", counted_as="chunking", uses=("opi.articles",), components=lambda a: (a["retriever"],),
       kept=lambda a: False)
def store_articles(retriever, contexts: list[str], language: str) -> StoreArticles:
    """The articles with a vector store's documents as their chunks (``retriever=vectorstore``); read from the
    store each run: its content can change."""
    return articles_of_store(contexts, retriever.documents(), language, store=run_store())


@stage("rank", counted_as="retrieval", uses=("opi.retrieval",), embeds=lambda a: a["retriever"].embeds,
       components=lambda a: (a["retriever"],), kept=lambda a: not a["retriever"].live)
def rank(retriever, depth: int, examples: list, articles: dict, embedding: EmbeddingConfig | None):
    """Each example's ranking to ``depth``: one ranking serves every ``k`` up to it. ``embedding``: the retriever's
    (its own settings over the run's); None for a retriever that does not embed (its rankings keep their cache
    whatever the embedding model)."""
    model = embedder_for(embedding) if embedding is not None else None
    return rank_examples(components.with_resources(retriever, embedder=model), examples, articles, depth)


@stage("rerank", counted_as="rerank", uses=("opi.rerankers", "opi.llm.client"),
       components=lambda a: (a["reranker"],), kept=lambda a: not a["reranker"].asks_llm)
def rerank(reranker, pools: dict, examples: list, articles: dict, llm: LLMConfig | None, llm_cache: str | None,
           model_key: str | None) -> Reranked:
    """Each example's candidate chunks (``pools``) reranked, what the reranker was asked (pairs, candidates left
    unscored) and its LLM usage. ``llm``, ``llm_cache``: None for a reranker that asks no LLM; ``model_key`` (for
    the cache key only): its model's content, where it has one."""
    client = client_for(llm, llm_cache, model=reranker.llm_model) if llm is not None else None
    model = components.with_resources(reranker, client=client)
    pairs = sum(len(pool.chunk_ids) for pool in pools.values())
    if client is None:
        rankings, unscored = rerank_examples(model, pools, examples, articles)
    else:
        bar, update = progress_bar(pairs, f"rerank ({reranker.name})", client)
        with bar:
            rankings, unscored = rerank_examples(model, pools, examples, articles, update)
    counts = {"rerank_pairs": float(pairs), "rerank_unscored": float(unscored)}
    if reranker.asks_llm:  # its replies that could not be parsed, also asked again
        counts["rerank_parse_failures"] = float(model.parse_failures)
    return Reranked(rankings, counts, client.usage.as_metrics("llm_rerank") if client is not None else {})


@stage("answer", counted_as="generation", uses=("opi.llm.client",), embeds=True,
       components=lambda a: (a["llm"].reader,), kept=lambda a: not a["llm"].endpoint)
def answer(llm: LLMConfig, questions: list[str], sentence_lists: list[list[str]], embedding: EmbeddingConfig,
           llm_cache: str) -> Answers:
    """Answers and the LLM usage they cost (calls, cache hits, retries, tokens, cost); ``embedding``: the reader's."""
    client = client_for(llm, llm_cache) if llm.endpoint else None
    reader = components.with_resources(llm.reader, embedder=embedder_for(embedding), client=client)
    if client is None:
        return Answers(reader.answer(questions, sentence_lists))
    bar, update = progress_bar(len(questions), f"answers ({llm.name})", client)
    with bar:
        answers = reader.answer(questions, sentence_lists, update)
    return Answers(answers, client.usage.as_metrics("llm_answer"), reader.calls)


def resources(context: StageContext) -> dict[str, Any]:
    return {"embedder": embedder_for(context.embedding), "embedding": context.embedding, "seed": context.seed,
            "relation_set": load_relation_set(context.relation_set)}


@stage("classify", counted_as="classification", uses=("opi.classify", "opi.relation_features", "opi.llm.client"),
       embeds=True, components=lambda a: (a["classifier"],),
       kept=lambda a: a["registered"] is not None or not a["classifier"].asks_llm)
def classify(classifier, llm: LLMConfig, training: TrainingSet | None, apply_ids: list[str], apply: list[Triple],
             context: StageContext, registered: RegisteredModel | None = None) -> Classified:
    """Predicted relations of ``apply`` (``unknown`` where an LLM reply could not be parsed), usage and counts.

    A classifier that learns is fitted on ``training``: cross-fitted when it is the evaluated data's own pool (no
    example labelled by a model that saw it), else fitted once. ``registered`` is applied as it is: its training
    data should not overlap the evaluated examples."""
    given = resources(context)
    if registered is not None:
        import mlflow.sklearn  # here: it imports scikit-learn, which a run without a registered model never needs

        model = components.with_resources(classifier, pipeline=mlflow.sklearn.load_model(registered.location),
                                          **given)
        return Classified(model.predict(apply))
    if classifier.trains:
        model = fitted(classifier, training, given)
        predicted = model.predict(apply_ids, apply) if training.cross_fit else model.predict(apply)
        return Classified(predicted)
    client = client_for(llm, context.llm_cache, model=classifier.model)
    model = components.with_resources(classifier, client=client, **given)
    bar, update = progress_bar(len(apply), f"relations ({classifier.name})", client)
    with bar:
        predicted = model.predict(apply, update)
    return Classified(predicted, client.usage.as_metrics("llm_classify"),
                      {"parse_failures": float(model.parse_failures)}, model.replies)


def fitted(classifier, training: TrainingSet, given: dict[str, Any]):
    """The classifier fitted on its training triples (cross-fitted, for the data's own pool), fitted once per
    process for the same settings and data."""
    key = content_hash(key_of(classifier), key_of(training), given["seed"], key_of(given["embedding"]))

    def fresh():
        return components.with_resources(classifier, **given)

    def fit():
        if training.cross_fit:
            return CrossFitted(fresh, training.ids, training.triples, training.labels, classifier.folds)
        return fresh().fit(training.triples, training.labels)
    return MEMORY.recall("fitted classifiers", key, fit)


@stage("classifier-accuracy", counted_as="classification", uses=("opi.classify", "opi.relation_features"),
       embeds=True, components=lambda a: (a["classifier"],))
def classifier_accuracy(classifier, training: TrainingSet, context: StageContext) -> float:
    """Cross-validated accuracy of the classifier on its labelled training triples."""
    pool = TrainingSet(training.ids, training.triples, training.labels, cross_fit=True)
    predicted = fitted(classifier, pool, resources(context)).predict(pool.ids, pool.triples)
    return float(sum(p == g for p, g in zip(predicted, pool.labels)) / len(pool.labels))


@stage("answer-similarity", counted_as="scoring", uses=("opi.metrics.opi",), embeds=True)
def answer_similarity(gold: list[str], generated: list[str | None], embedding: EmbeddingConfig) -> list[float]:
    """Cosine of each gold and generated answer's embeddings by the yardstick (``metrics.similarity``); NaN where
    there is no answer; 0 for a blank one (a reader handed nothing says nothing, which matches nothing: its
    embedding would still be ~0.2 from the gold's)."""
    embedder = embedder_for(embedding)
    given = [i for i, answer in enumerate(generated) if answer is not None and answer.strip()]
    cosines = cosine_rows(embedder.encode([gold[i] for i in given], normalize=False),
                          embedder.encode([generated[i] for i in given], normalize=False))
    similarities = [float("nan") if answer is None else 0.0 for answer in generated]
    for i, cosine in zip(given, cosines):
        similarities[i] = float(cosine)
    return similarities


@stage("answer-quality", counted_as="answer-metrics",
       uses=("opi.metrics.correctness", "opi.metrics.extrinsic", "opi.llm.client"), kept=False)
def answer_quality(metrics: MetricsConfig, llm: LLMConfig, questions: list[str], truths: list[str],
                   answers: list[str], similarities: list[float], llm_cache: str) -> Quality:
    """LLM-scored answer metrics per example (None where a reply could not be parsed), the judge's reasons and
    their usage."""
    client = client_for(llm, llm_cache)
    columns: dict[str, list] = {}
    texts: dict[str, list] = {}  # per-example text beside the scores: the judge's reasons
    counts: dict[str, float] = {}
    given = [i for i, answer in enumerate(answers) if answer is not None]  # no answer, no score
    if metrics.correctness:
        scorer = AnswerCorrectness(client, metrics.correctness_weights, metrics.similarity_threshold,
                                   metrics.parse_retries)
        results = {i: scorer.score(questions[i], answers[i], truths[i], similarities[i]) for i in given}
        columns["correctness"] = [results[i].score if i in results else None for i in range(len(answers))]
        columns["correctness_f1"] = [results[i].f1 if i in results else None for i in range(len(answers))]
        counts["correctness_failures"] = float(sum(r.score is None for r in results.values()))
    if metrics.judge:
        judge = LLMJudge(client, metrics.parse_retries)
        scores = dict(zip(given, judge.score(*([values[i] for i in given] for values in (questions, truths, answers)))))
        columns["judge_score"] = [scores.get(i) for i in range(len(answers))]
        counts["judge_failures"] = float(judge.parse_failures)
        reasons = dict(zip(given, judge.reasons))
        texts["judge_reason"] = [reasons.get(i) for i in range(len(answers))]
    return Quality(columns, texts, counts, client.usage.as_metrics("llm_metrics"))


@stage("sweep-report", counted_as="report", uses=("opi.report",))
def sweep_report(configurations: list, relations: list[str], settings):
    """The sweep report's tables and tests. The parent run calls it outside any flow and keeps the report whole,
    keyed on this stage's code (``flows.tracking.sweep_report.built_report``)."""
    return build_report(configurations, relations, settings)


STAGES: tuple[Stage, ...] = (chunk_articles, store_articles, rank, rerank, answer, classify, classifier_accuracy, answer_similarity,
                             answer_quality, sweep_report)
