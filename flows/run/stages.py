"""The steps of one configuration that need more than one stage call (``flows.run.pipeline`` walks them): the
chunked articles (read once per process), retrieval (member rankings, reranked, cut and combined), the relations
(gold and predicted), and the last step, the per-example rows scored. Each takes the configuration, the data, what
the steps before it produced (``Results``) and the stage caller; each returns its typed result."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from flows.orchestration import tasks
from flows.orchestration.cache import StageCalls
from flows.orchestration.hashing import HashedDict, content_hash, hashed
from flows.orchestration.results import Answers, Quality, Scores
from flows.orchestration.tasks import RegisteredModel, StageContext
from flows.run.data import Data, training_for
from flows.run.identity import describe, live_stores, own_embedding
from flows.run.preflight import notice_once
from opi.articles import Article, StoreArticles, corpus_view
from opi.classify import training_warnings
from opi.combine import Single
from opi.memory import MEMORY
from opi.metrics.configuration import configuration_metrics, usage_totals
from opi.metrics.retrieval import retrieval_columns
from opi.predictions import prediction_rows, with_scores
from opi.relations import UNKNOWN, Triple
from opi.rerankers import candidate_pools, reranks
from opi.retrieval import combine, cut, evaluated_rankings
from opi.retrievers.base import VectorStoreUnavailable
from opi.schemas import OPIConfig
from opi.trace_records import chunk_sources, trace_records


@dataclass(frozen=True)
class Retrieval:
    """Each example's retrieved chunks and complete sentences (``retrieved``), each chunk's score and the retriever
    it came from (``sources``), the rank-aware retrieval metrics per example (``scores``; none without gold
    evidence), and the reranker's counts and LLM usage (``reranking``)."""

    retrieved: dict[str, Any]
    sources: dict[str, list]
    scores: dict[str, list]
    reranking: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Relations:
    """The examples with their gold relations (the data's or the classifier's; None without), the predicted
    relation of each generated answer (None: no answer), the question-only baseline's, the classifier's counts
    and usage, and an LLM classifier's raw replies (for the traces)."""

    examples: list
    predicted: list[str | None]
    question_only: list[str] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    replies: list[str | None] | None = None


@dataclass
class Results:
    """What one configuration's steps produced so far: each field is filled by the step of that name, in order."""

    registered: RegisteredModel | None = None
    articles: dict[str, Article] | None = None
    retrieval: Retrieval | None = None
    sentences: list[list[str]] | None = None
    answers: Answers | None = None
    relations: Relations | None = None
    similarities: list[float] | None = None
    store: StoreArticles | None = None  # a vector store's documents as the articles' chunks (retriever=vectorstore)
    quality: Quality = field(default_factory=Quality)


def chunked_articles(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> dict[str, Article]:
    """Every article of the data, segmented and chunked (a stage; read once per process), as the retrievers see
    them: one index per article, or one over the corpus."""
    language = config.sentences.language
    if results.store is not None:
        articles = hashed(results.store.articles)
        return articles if config.retrieval.scope == "article" else corpus_of(articles)
    key = articles_key(config, data)
    if MEMORY.holds("chunked articles", key):  # one read of the cached result per process, not one per job
        calls.hits += 1
    # marked with the hash of what they are made of (the stage's whole input and code), not of their own content:
    # JSON of every chunk and sentence cost a race ~0.7 s per round job
    articles = MEMORY.recall("chunked articles", key, lambda: hashed(
        calls.call(tasks.chunk_articles, data.contexts, config.chunking, language),
        content_hash("chunked-articles", *key)))
    return articles if config.retrieval.scope == "article" else corpus_of(articles)


def articles_key(config: OPIConfig, data: Data) -> tuple:
    """What the chunked articles of ``data`` are kept under in this process."""
    return (data.contexts.content_hash, dataclasses.astuple(config.chunking), config.sentences.language,
            tasks.chunk_articles.code())


def corpus_of(articles: HashedDict) -> HashedDict:
    corpus = HashedDict(corpus_view(articles))
    corpus.content_hash = content_hash("corpus", articles.content_hash)  # not the merged text once per article
    return corpus


def store_documents(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> StoreArticles:
    """The store's documents located in the articles (they are the configuration's chunks); those in none said."""
    (member,) = live_stores(config)  # one a configuration (preflight.check_vector_store)
    located = calls.call(tasks.store_articles, member, data.contexts, config.sentences.language)
    articles = len(located.articles)
    empty = (f" ({located.without_text} of them have no text where LangChain reads it: Chroma's documents, or "
             f"Qdrant's payload key retriever.text_field={member.text_field!r})" if located.without_text else "")
    if located.not_found == located.documents:
        raise VectorStoreUnavailable(f"retriever=vectorstore: none of the {located.documents} documents of the "
                                     f"{member.where} is in the {articles} articles of the data{empty}: it holds "
                                     "other text, so nothing of the data can be retrieved")
    if located.not_found:
        notice_once(f"{located.not_found} of the {located.documents} documents of the {member.where} are in none of "
                    f"the {articles} articles of the data{empty}: they cannot be retrieved for its questions")
    if located.without_documents and config.retrieval.scope == "article":
        notice_once(f"{located.without_documents} of the {articles} articles of the data have none of the documents "
                    f"of the {member.where}: their questions retrieve nothing")
    return located


def ranking_depth(config: OPIConfig) -> int:
    """How deep the members' rankings are computed: ``retrieval.depth``, or deeper for a member's larger ``k``, the
    deepest cut-off of the retrieval metrics or the reranker's ``candidates``."""
    candidates = [config.rerank.candidates] if reranks(config.rerank) else []
    return max(config.retrieval.depth, *config.metrics.retrieval_k, *(m.k for m in config.members().values()),
               *candidates)


def retrieve(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> Retrieval:
    """Member rankings (cached per member's settings, so kNN alone and kNN inside A-Four share work, whatever their
    k), reranked (``rerank``), each cut to its member's k, combined; with the metrics of the rankings the reader's
    chunks come from."""
    articles, depth, members = results.articles, ranking_depth(config), list(config.members().values())
    identity = describe(config)
    rankings = calls.call_many(tasks.rank, *[
        (member, depth, data.examples, articles, own_embedding(config, member) if member.embeds else None)
        for member in members])
    combination, ks, reranking = config.combination, [member.k for member in members], {}
    names, label = list(identity.members), identity.retrieval  # e.g. kNN, A-Four, kNN > cross-encoder
    if reranks(config.rerank):
        combination, rankings, ks, reranking = reranked_retrieval(config, data, articles, rankings, calls)
        names = names if len(rankings) == len(names) else [label]
    cuts = [cut(ranked, k) for ranked, k in zip(rankings, ks)]
    evaluated, ordered = evaluated_rankings(combination, rankings, cuts, data.examples)
    columns = retrieval_columns(data.examples, evaluated, articles, config.metrics.retrieval_k, ordered,
                                config.metrics.evidence_match)
    scores = {name: values for name, values in columns.items() if any(v is not None for v in values)}
    retrieved = combine(combination, cuts, data.examples, articles)
    sources = {e.id: chunk_sources(retrieved[e.id], evaluated[e.id][0] if ordered else None,
                                   [member[e.id] for member in cuts], names, label) for e in data.examples}
    return Retrieval(retrieved, sources, scores, reranking)


def reranked_retrieval(config: OPIConfig, data: Data, articles: dict[str, Article], rankings: list,
                       calls: StageCalls) -> tuple[Any, list, list, dict[str, float]]:
    """The combination, rankings and cuts that apply once the reranker has read the candidates: for a combination
    with an order of its own (A-), its fused candidates reranked, handed on as one ranking cut to its k; else
    (single, S-) each member's candidates reranked, cut to the member's k. With the reranker's counts and usage.
    One reranked list per member of an S- combination, so kNN's reranked candidates serve kNN alone too."""
    reranker, candidates = config.rerank, config.rerank.candidates
    pools = None if config.single else candidate_pools(config.combination, rankings, candidates)
    lists = [pools] if pools is not None else [cut(ranked, candidates) for ranked in rankings]
    llm, llm_cache = (config.llm, config.paths.llm_cache) if reranker.asks_llm else (None, None)
    reranked = calls.call_many(tasks.rerank, *[
        (reranker, hashed(pool), data.examples, articles, llm, llm_cache, reranker.content_key()) for pool in lists])
    reranking: dict[str, float] = {}
    for result in reranked:
        reranking = added(reranking, {**result.counts, **result.usage})
    if pools is not None:
        return Single(), [reranked[0].rankings], [config.combination.k], reranking
    return config.combination, [r.rankings for r in reranked], [m.k for m in config.members().values()], reranking


def relation_stages(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> Relations:
    """Gold relations (the data's, or the classifier's on the gold triples) and predicted ones (the classifier's
    on the generated answers; None where there is no answer); with ``relations.gold=none``, neither."""
    examples = data.examples
    if config.relations.gold == "none":  # the data's own labels too are set aside: no LRCR, no OPI
        return Relations([dataclasses.replace(e, relation=None) for e in examples], [None] * len(examples))
    training = training_for(config, data)
    context = StageContext(own_embedding(config, config.classifier), config.relations.set, config.seed,
                           config.paths.llm_cache)
    ids = [e.id for e in examples]

    def classify(triples: list, of: list[str] = ids):
        return calls.call(tasks.classify, config.classifier, config.llm, training, of, triples, context,
                          results.registered)

    answered = [i for i, answer in enumerate(results.answers.answers) if answer is not None]
    applied = [Triple(" ".join(results.sentences[i]), examples[i].question, results.answers.answers[i])
               for i in answered]
    predicted = classify(hashed(applied), [ids[i] for i in answered])
    labels, replies = spread(predicted.predicted, answered, len(examples)), None
    if predicted.replies is not None:  # an LLM classifier's raw replies, for the traces
        replies = spread(predicted.replies, answered, len(examples))
    metrics, usage = dict(predicted.counts), dict(predicted.usage)
    if config.relations.gold == "classifier":
        gold = classify(hashed([Triple(e.context, e.question, e.answer) for e in examples]))
        examples = [dataclasses.replace(e, relation=label if label != UNKNOWN else None)
                    for e, label in zip(examples, gold.predicted)]
        usage = added(usage, gold.usage)
    # how much of LRCR the question alone explains: the same classifier, text and answer blanked (one result a sweep)
    question_only = classify(hashed([Triple("", e.question, "") for e in examples]))
    usage = added(usage, question_only.usage)
    if training is not None:  # the same for every configuration of a sweep: one cached result
        metrics["classifier_cv_accuracy"] = calls.call(tasks.classifier_accuracy, config.classifier, training,
                                                       context)
        for warning in training_warnings(training.labels, metrics["classifier_cv_accuracy"]):
            notice_once(warning)
    return Relations(examples, labels, question_only.predicted, metrics, usage, replies)


def spread(values: list, at: list[int], n: int) -> list:
    """``values`` placed at the positions ``at`` of a list of ``n`` (None elsewhere)."""
    placed: list = [None] * n
    for i, value in zip(at, values):
        placed[i] = value
    return placed


def added(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    return {k: first.get(k, 0.0) + second.get(k, 0.0) for k in {*first, *second}}


def scored(config: OPIConfig, data: Data, results: Results, stages: int) -> Scores:
    """The per-example rows (predictions, similarities, retrieval and LLM-scored metrics) and the configuration's
    metrics over them; ``stages``: how many stage results the configuration took."""
    examples, retrieval, relations, quality = data.examples, results.retrieval, results.relations, results.quality
    answers = results.answers
    rows = prediction_rows(relations.examples, retrieval.retrieved, results.sentences, answers.answers,
                           relations.predicted, results.similarities, results.articles,
                           corpus=config.retrieval.scope == "corpus")
    if relations.question_only is not None:
        rows["predicted_relation_question_only"] = relations.question_only
    rows["chunk_scores"] = [[score for score, _ in retrieval.sources[e.id]] for e in examples]
    rows = with_scores(with_scores(rows, retrieval.scores), quality.columns)
    for column, values in quality.texts.items():
        rows[column] = values
    metrics, table = configuration_metrics(rows, data.relation_set.labels, config.metrics.betas,
                                           config.metrics.beta, config.report.confidence, config.report.resamples,
                                           config.seed, config.report.unit)
    usage = {**retrieval.reranking, **answers.usage, **relations.usage, **quality.usage}
    if results.store is not None:
        metrics.update(store_documents=float(results.store.documents),
                       store_documents_not_found=float(results.store.not_found))
    metrics.update({**relations.metrics, **quality.counts, **usage, **usage_totals(usage),
                    "rows_dropped": float(sum(data.report.dropped.values()))})
    traces = trace_records(examples, retrieval.retrieved, retrieval.sources, results.articles, results.sentences,
                           answers.calls, relations.replies)
    return Scores(metrics, rows, table, traces, stages)
