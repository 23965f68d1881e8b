"""The stages of one configuration, as cached task calls (``flows.orchestration.tasks``), in the order the data
walks: articles chunked -> member rankings (to a depth, shared by every k) -> cut and combined -> sentences ->
answers -> relations -> answer similarity (-> LLM-scored answer metrics) -> per-example rows -> metrics."""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

from prefect.utilities.hashing import hash_objects

from flows.orchestration import tasks
from flows.orchestration.cache import HashedDict, StageCalls, hashed
from flows.orchestration.tasks import RegisteredModel, StageContext, code_for
from flows.run.data import Data, training_for
from flows.run.identity import describe, own_embedding
from flows.run.preflight import notice_once
from opi.articles import Article, corpus_view
from opi.classify import training_warnings
from opi.combine import Single
from opi.llm.faults import LLMError
from opi.metrics.configuration import configuration_metrics, usage_totals
from opi.metrics.retrieval import retrieval_columns
from opi.predictions import prediction_rows, with_scores
from opi.relations import UNKNOWN, Triple
from opi.rerankers import candidate_pools, reranks
from opi.trace_records import chunk_sources, trace_records
from opi.retrieval import combine, cut, evaluated_rankings, sentence_texts
from opi.schemas import OPIConfig

log = logging.getLogger("opi")
_ARTICLES: dict[tuple, Any] = {}  # the chunked articles of the last dataset: every job of a sweep needs them


def chunked_articles(config: OPIConfig, data: Data, stages: StageCalls) -> dict[str, Article]:
    """Every article of the data, segmented and chunked (a cached task; read once per process), as the
    retrievers see them: one index per article, or one over the corpus."""
    code = code_for(tasks.chunk_articles)
    language = config.sentences.language
    key = (data.contexts.content_hash, dataclasses.astuple(config.chunking), language, code)
    if key in _ARTICLES:  # one read of the cached result per process, not one per job (22 MB at 2,400 rows)
        stages.hits += 1
        articles = _ARTICLES[key]
    else:
        articles = hashed(stages.call("chunking", tasks.chunk_articles, data.contexts, config.chunking, language,
                                      code))
        _ARTICLES.clear()
        _ARTICLES[key] = articles
    if config.retrieval.scope == "article":
        return articles
    corpus = HashedDict(corpus_view(articles))
    corpus.content_hash = hash_objects("corpus", articles.content_hash)  # not the merged text once per article
    return corpus


def ranking_depth(config: OPIConfig) -> int:
    """How deep the members' rankings are computed: ``retrieval.depth``, or deeper for a member's larger ``k``, the
    deepest cut-off of the retrieval metrics or the reranker's ``candidates``."""
    candidates = [config.rerank.candidates] if reranks(config.rerank) else []
    return max(config.retrieval.depth, *config.metrics.retrieval_k, *(m.k for m in config.members().values()),
               *candidates)


def retrieve(config: OPIConfig, data: Data, articles: dict[str, Article], stages: StageCalls
             ) -> tuple[dict, dict, dict[str, list], dict[str, float]]:
    """Each example's retrieved chunks and complete sentences: member rankings (cached per member's settings, so
    kNN alone and kNN inside A-Four share work, whatever their k), reranked (``rerank``), each cut to its member's
    k, combined; each chunk's score and the retriever it came from (``chunk_sources``); the rank-aware retrieval
    metrics of each example against its gold evidence (none without evidence), read from the rankings the
    reader's chunks come from; and the reranker's counts and LLM usage."""
    depth, members, identity = ranking_depth(config), list(config.members().values()), describe(config)
    rankings = stages.call_many("retrieval", tasks.rank, *[
        (member, depth, data.examples, articles, own_embedding(config, member) if member.embeds else None,
         tasks.rank_code(member)) for member in members])
    combination, ks, reranking = config.combination, [member.k for member in members], {}
    names, label = list(identity.members), identity.retrieval  # e.g. kNN, A-Four, kNN > cross-encoder
    if reranks(config.rerank):
        combination, rankings, ks, reranking = reranked_retrieval(config, data, articles, rankings, stages)
        names = names if len(rankings) == len(names) else [label]
    cuts = [cut(ranked, k) for ranked, k in zip(rankings, ks)]
    evaluated, ordered = evaluated_rankings(combination, rankings, cuts, data.examples)
    columns = retrieval_columns(data.examples, evaluated, articles, config.metrics.retrieval_k, ordered,
                                config.metrics.evidence_match)
    scores = {name: values for name, values in columns.items() if any(v is not None for v in values)}
    retrieved = combine(combination, cuts, data.examples, articles)
    sources = {e.id: chunk_sources(retrieved[e.id], evaluated[e.id][0] if ordered else None,
                                   [member[e.id] for member in cuts], names, label) for e in data.examples}
    return retrieved, sources, scores, reranking


def reranked_retrieval(config: OPIConfig, data: Data, articles: dict[str, Article], rankings: list,
                       stages: StageCalls) -> tuple[Any, list, list, dict[str, float]]:
    """The combination, rankings and cuts that apply once the reranker has read the candidates: for a combination
    with an order of its own (A-), its fused candidates reranked, handed on as one ranking cut to its k; else
    (single, S-) each member's candidates reranked, cut to the member's k. With the reranker's counts and usage."""
    candidates = config.rerank.candidates
    pools = None if config.single else candidate_pools(config.combination, rankings, candidates)
    if pools is not None:
        (fused,), reranking = rerank_stage(config, [pools], data, articles, stages)
        return Single(), [fused], [getattr(config.combination, "k", None)], reranking
    reranked, reranking = rerank_stage(config, [cut(ranked, candidates) for ranked in rankings], data, articles,
                                       stages)
    return config.combination, reranked, [member.k for member in config.members().values()], reranking


def rerank_stage(config: OPIConfig, pools: list[dict], data: Data, articles: dict[str, Article],
                 stages: StageCalls) -> tuple[list[dict], dict[str, float]]:
    """Each list of candidates (by example id) reranked by a cached task call: one per member of an S-
    combination, so kNN's reranked candidates serve kNN alone too. A reranker that asks the LLM is run every time
    (its replies are in the LLM call cache, which alone knows which were no answer)."""
    reranker = config.rerank
    asks_llm = reranker.asks_llm
    llm, llm_cache = (config.llm, config.paths.llm_cache) if asks_llm else (None, None)
    model_key = reranker.content_key()
    results = stages.call_many("rerank", tasks.rerank, *[
        (reranker, hashed(pool), data.examples, articles, llm, llm_cache, model_key,
         code_for(tasks.rerank, reranker)) for pool in pools], kept=not asks_llm)
    reranking: dict[str, float] = {}
    for result in results:
        reranking = added(reranking, {**result["counts"], **result["usage"]})
    return [result["rankings"] for result in results], reranking


def relation_stages(config: OPIConfig, data: Data, applied: list, registered: RegisteredModel | None,
                    stages: StageCalls) -> dict[str, Any]:
    """Gold relations (the data's, or the classifier's on the gold triples) and predicted ones (the classifier's
    on the generated answers; None where there is no answer); with ``relations.gold=none``, neither."""
    examples = data.examples
    if config.relations.gold == "none":  # the data's own labels too are set aside: no LRCR, no OPI
        return {"examples": [dataclasses.replace(e, relation=None) for e in examples],
                "predicted": [None] * len(examples), "question_only": None, "metrics": {}, "usage": {},
                "replies": None}
    training = training_for(config, data)
    context = StageContext(own_embedding(config, config.classifier), config.relations.set, config.seed,
                           config.paths.llm_cache)
    code, ids = code_for(tasks.classify, config.classifier), [e.id for e in examples]

    asks_llm = config.classifier.asks_llm and registered is None

    def classify(triples: list, of: list[str] = ids) -> dict[str, Any]:
        return stages.call("classification", tasks.classify, config.classifier, config.llm, training, of, triples,
                           context, code, registered, kept=not asks_llm)

    answered = [i for i, triple in enumerate(applied) if triple is not None]  # an LLM that gave no answer: none
    predicted = classify(hashed([applied[i] for i in answered]), [ids[i] for i in answered])
    labels: list[str | None] = [None] * len(examples)
    for i, label in zip(answered, predicted["predicted"]):
        labels[i] = label
    replies: list[str | None] | None = None  # an LLM classifier's raw replies, for the traces
    if predicted.get("replies") is not None:
        replies = [None] * len(examples)
        for i, reply in zip(answered, predicted["replies"]):
            replies[i] = reply
    metrics, usage = dict(predicted["counts"]), dict(predicted["usage"])
    if config.relations.gold == "classifier":
        gold = classify(hashed([Triple(e.context, e.question, e.answer) for e in examples]))
        examples = [dataclasses.replace(e, relation=label if label != UNKNOWN else None)
                    for e, label in zip(examples, gold["predicted"])]
        usage = added(usage, gold["usage"])
    # how much of LRCR the question alone explains: the same classifier, text and answer blanked (one result a sweep)
    question_only = classify(hashed([Triple("", e.question, "") for e in examples]))
    usage = added(usage, question_only["usage"])
    if training is not None:  # the same for every configuration of a sweep: one cached result
        metrics["classifier_cv_accuracy"] = stages.call(
            "classification", tasks.classifier_accuracy, config.classifier, training, context,
            code_for(tasks.classifier_accuracy, config.classifier))
        for warning in training_warnings(training.labels, metrics["classifier_cv_accuracy"]):
            notice_once(warning)
    return {"examples": examples, "predicted": labels, "question_only": question_only["predicted"],
            "metrics": metrics, "usage": usage, "replies": replies}


def added(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    return {k: first.get(k, 0.0) + second.get(k, 0.0) for k in {*first, *second}}


def run_stages(config: OPIConfig, data: Data, registered: RegisteredModel | None
               ) -> tuple[dict[str, Any], dict[str, float]]:
    """All stages of one configuration: (result, this run's cache counts, seconds and the work its tasks did)."""
    examples, llm_cache = data.examples, config.paths.llm_cache
    stages = StageCalls(config.paths.cache_dir, quote_inputs=config.orchestration.runner == "threads",
                        embedding_store=config.paths.embedding_store)
    articles = chunked_articles(config, data, stages)
    retrieved, sources, retrieval_scores, reranking = retrieve(config, data, articles, stages)
    texts = [sentence_texts(e, articles, retrieved[e.id]) for e in examples]
    questions, truths = [e.question for e in examples], [e.answer for e in examples]
    generation = stages.call("generation", tasks.answer, config.llm, questions, texts,
                             own_embedding(config, config.llm.reader), llm_cache, code_for(tasks.answer, config.llm.reader),
                             kept=not config.llm.endpoint)
    answers = generation["answers"]
    if all(a is None for a in answers):
        raise LLMError(f"{config.llm.name} gave no answer to any of the {len(answers)} questions (every reply was "
                       "empty or a refusal, also when asked again): check llm.model and the answer prompt")
    applied = [Triple(" ".join(t), e.question, a) if a is not None else None
               for e, t, a in zip(examples, texts, answers)]
    relations = relation_stages(config, data, applied, registered, stages)
    similarities = stages.call("scoring", tasks.answer_similarity, truths, answers, config.metrics.similarity,
                               code_for(tasks.answer_similarity))
    rows = prediction_rows(relations["examples"], retrieved, texts, answers, relations["predicted"], similarities,
                           articles, corpus=config.retrieval.scope == "corpus")
    if relations["question_only"] is not None:
        rows["predicted_relation_question_only"] = relations["question_only"]
    rows["chunk_scores"] = [[score for score, _ in sources[e.id]] for e in examples]
    rows = with_scores(rows, retrieval_scores)
    quality = {"columns": {}, "texts": {}, "counts": {}, "usage": {}}
    if config.metrics.correctness or config.metrics.judge:
        quality = stages.call("answer-metrics", tasks.answer_quality, config.metrics, config.llm, questions, truths,
                              answers, similarities, llm_cache, code_for(tasks.answer_quality), kept=False)
        rows = with_scores(rows, quality["columns"])
        for column, values in quality["texts"].items():
            rows[column] = values
    metrics, table = configuration_metrics(rows, data.relation_set.labels, config.metrics.betas,
                                           config.metrics.beta, config.report.confidence, config.report.resamples,
                                           config.seed, config.report.unit)
    usage = {**reranking, **generation["usage"], **relations["usage"], **quality["usage"]}
    metrics.update({**relations["metrics"], **quality["counts"], **usage, **usage_totals(usage),
                    "rows_dropped": float(sum(data.report.dropped.values()))})
    traces = trace_records(examples, retrieved, sources, articles, texts, generation.get("calls"),
                           relations["replies"])
    return ({"metrics": metrics, "predictions": rows, "per_relation": table, "traces": traces,
             "stages": stages.hits + stages.misses}, stages.counts())
