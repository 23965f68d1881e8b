"""Rerankers in a run: ``flows.run.stages.retrieve`` with each combination kind (in this process, each stage
called directly), and ``opi-eval rerank=...`` end to end: a reranker of the user's own by ``_target_``, the LLM
reranker against the fake endpoint (a second run asks nothing), a cross-encoder from a local folder, and
``rerank=none`` handing on what the retriever alone does."""
import os
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest

from flows.orchestration import tasks
from flows.orchestration.hashing import hashed
from flows.run.config import compose_config, typed
from flows.run.stages import Results, ranking_depth, retrieve
from opi.articles import prepare_articles
from opi.combine import reciprocal_rank_fusion
from opi.data import Example
from opi.schemas import EmbeddingConfig
from tests.helpers.cli import run_cli
from tests.helpers.direct_calls import DirectCalls
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.paths import ROOT

REVERSE = "tests.helpers.toy_components.ReversingReranker"
LEXICAL = ["combination.members=[bm25,tfidf]"]  # members that embed nothing: no model is loaded in this process
ARTICLE = " ".join(f"Keeper {i} of the harbour was born in {1800 + i} and kept {i % 4 + 1} boats." for i in range(24))


@pytest.fixture(scope="module")
def corpus():
    articles = hashed(prepare_articles([ARTICLE], size=13, overlap=0))
    (article,) = articles.values()
    evidence = article.chunks[5].text  # one chunk holds it (no overlap)
    examples = hashed([Example("a", ARTICLE, "When was keeper 5 born?", "1805", evidence=(evidence,)),
                       Example("b", ARTICLE, "How many boats did keeper 13 keep?", "2")])
    return SimpleNamespace(examples=examples), articles


def config_of(*overrides: str):
    return typed(compose_config(["retriever=bm25", *overrides]))


def member_rankings(config, corpus) -> list[dict]:
    """Each member's own ranking, as the run ranks it."""
    data, articles = corpus
    return [tasks.rank.fn(member, ranking_depth(config), data.examples, articles, EmbeddingConfig())
            for member in config.members().values()]


def retrieved_ids(config, corpus) -> tuple[dict[str, tuple], dict, dict, list[str]]:
    calls, (data, articles) = DirectCalls(), corpus
    retrieval = retrieve(config, data, Results(articles=articles), calls)
    assert all(len(retrieval.sources[i]) == len(r.chunk_ids) for i, r in retrieval.retrieved.items())  # a score each
    return ({example_id: r.chunk_ids for example_id, r in retrieval.retrieved.items()}, retrieval.scores,
            retrieval.reranking, calls.stages)


def reversed_top(ranking, candidates: int, k: int) -> tuple:
    return ranking.chunk_ids[:candidates][::-1][:k]


def test_none_ranks_and_hands_on_as_without_rerankers(corpus):
    config = config_of("rerank=none")
    (bm25,) = member_rankings(config, corpus)
    ids, scores, reranking, stages = retrieved_ids(config, corpus)
    assert ids == {e: r.chunk_ids[:4] for e, r in bm25.items()} and reranking == {} and stages == ["retrieval"]
    assert ranking_depth(config) == ranking_depth(config_of()) == 20
    assert scores["mrr"][0] == 1 / (bm25["a"].chunk_ids.index(5) + 1)


@pytest.mark.parametrize("candidates, k", [(4, 4), (6, 4), (30, 2)])
def test_a_single_retrievers_candidates_are_reranked_then_cut_to_k(corpus, candidates, k):
    config = config_of("rerank=custom", f"rerank._target_={REVERSE}", f"rerank.candidates={candidates}",
                       f"retriever.k={k}")
    (bm25,) = member_rankings(config, corpus)
    ids, scores, reranking, stages = retrieved_ids(config, corpus)
    assert ids == {e: reversed_top(r, candidates, k) for e, r in bm25.items()}
    pairs = sum(min(candidates, len(r.chunk_ids)) for r in bm25.values())
    assert reranking == {"rerank_pairs": pairs, "rerank_unscored": 0} and stages == ["retrieval", "rerank"]
    reranked_a = bm25["a"].chunk_ids[:candidates][::-1]  # what the rank-aware metrics read
    assert scores["mrr"][0] == (1 / (reranked_a.index(5) + 1) if 5 in reranked_a else 0)
    assert ranking_depth(config) == max(20, candidates)


def reversed_combination(corpus, combination: str, candidates: int, *more: str):
    """The two lexical members' own rankings, and what the combination retrieves with the reversing reranker."""
    config = config_of(f"combination={combination}", *LEXICAL, "rerank=custom", f"rerank._target_={REVERSE}",
                       f"rerank.candidates={candidates}", *more)
    return (*member_rankings(config, corpus), *retrieved_ids(config, corpus))


def test_an_a_combination_reranks_its_fused_candidates_then_cuts_to_its_k(corpus):
    bm25, tfidf, ids, scores, reranking, stages = reversed_combination(corpus, "a_two", 6, "combination.k=3")
    for example_id, chosen in ids.items():
        fused = reciprocal_rank_fusion([bm25[example_id].top(6), tfidf[example_id].top(6)], None, 60, 6)
        assert chosen == reversed_top(fused, 6, 3)
    assert reranking["rerank_pairs"] == 12 and stages == ["retrieval", "rerank"]
    assert "ndcg_at_4" in scores  # the reranked fusion has an order: rank-aware metrics read it


def test_an_s_combination_reranks_each_members_candidates_before_the_union(corpus):
    bm25, tfidf, ids, _, reranking, stages = reversed_combination(corpus, "s_two", 5, "retrievers.tfidf.k=2")
    for example_id, chosen in ids.items():
        expected = [*reversed_top(bm25[example_id], 5, 4), *reversed_top(tfidf[example_id], 5, 2)]
        assert chosen == tuple(dict.fromkeys(expected))
    assert reranking["rerank_pairs"] == 20 and stages == ["retrieval", "rerank"]  # one task call per member


# --- end to end -------------------------------------------------------------------------------------------------

ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
QUICK = ["dataset.limit=3", "relations.gold=none", "report.enabled=false"]


def configuration_runs(tmp_path) -> list:
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    return client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'",
                              order_by=["attributes.start_time ASC"])


def predictions(run, tmp_path) -> pd.DataFrame:
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    folder = tmp_path / "downloads" / run.info.run_id
    folder.mkdir(parents=True, exist_ok=True)
    return pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions.parquet", str(folder)))


def chunk_ids(run, tmp_path) -> list[list[int]]:
    return [list(ids) for ids in predictions(run, tmp_path)["chunk_ids"]]


@pytest.mark.slow
def test_a_custom_reranker_reverses_knn_and_a_two_and_none_changes_nothing(tmp_path, finished_sweep):
    sweep = ["-m", "setup=knn,a_two", *QUICK]
    run_cli("flows.cli.evaluate", tmp_path, *sweep, "rerank=none", env=ENV)
    run_cli("flows.cli.evaluate", tmp_path, *sweep, "rerank=custom", f"rerank._target_={REVERSE}",
            "rerank.candidates=4", env=ENV)
    runs = {(run.data.tags["opi.setup"], run.data.params["rerank.name"]): run for run in configuration_runs(tmp_path)}
    assert set(runs) == {("kNN", "none"), ("A-Two", "none"), ("kNN", "reverse"), ("A-Two", "reverse")}
    for setup in ("kNN", "A-Two"):  # k = candidates = 4: the same four chunks, in reverse order
        plain, reranked = runs[(setup, "none")], runs[(setup, "reverse")]
        assert chunk_ids(reranked, tmp_path) == [ids[::-1] for ids in chunk_ids(plain, tmp_path)]
        assert reranked.data.metrics["rerank_pairs"] == 12 and reranked.data.metrics["rerank_unscored"] == 0
        assert "seconds_rerank" in reranked.data.metrics and reranked.data.params["rerank.candidates"] == "4"
        assert not [name for name in plain.data.metrics if "rerank" in name]
    # rerank=none, said explicitly, hands on what a run that does not name it does (the shared smoke sweep's kNN)
    folder, uri, _, experiment_id = finished_sweep
    client = mlflow.MlflowClient(uri)
    (smoke_knn,) = client.search_runs([experiment_id], "tags.`opi.role` = 'configuration' and tags.`opi.setup` = 'kNN'")
    smoke = pd.read_parquet(client.download_artifacts(smoke_knn.info.run_id, "predictions.parquet", str(tmp_path)))
    plain = predictions(runs[("kNN", "none")], tmp_path)
    retrieval = ["id", "chunk_ids", "sentence_ids", "generated_answer", "similarity", "mrr", "recall_at_4"]
    columns = [c for c in retrieval if c in smoke]
    assert len(columns) >= 5
    pd.testing.assert_frame_equal(plain[columns], smoke[columns])


@pytest.mark.slow
def test_the_llm_reranker_asks_the_endpoint_once_and_a_second_run_reads_the_call_cache(tmp_path):
    with FakeOpenAI() as server:
        run = ["llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=fake", "llm.api_key_env=null",
               "setup=knn", "rerank=llm", "rerank.candidates=4", "dataset.limit=2", "relations.gold=none",
               "report.enabled=false"]
        run_cli("flows.cli.evaluate", tmp_path, *run)
        asked = len(server.bodies)
        run_cli("flows.cli.evaluate", tmp_path, *run, cache="cache-2")  # a new stage cache, the same LLM call cache
        run_cli("flows.cli.evaluate", tmp_path, *run)  # the first stage cache: the whole result kept there, read
        assert len(server.bodies) == asked
    rated = [body for body in server.bodies if "relevance" in str(body.get("response_format"))]
    assert len(rated) == 8  # 2 questions x 4 candidates, once
    first, second, third = configuration_runs(tmp_path)
    assert first.data.metrics["llm_rerank_calls"] == 8 and first.data.metrics["llm_rerank_http_requests"] == 8
    assert second.data.metrics["llm_rerank_http_requests"] == 0 and second.data.metrics["llm_rerank_cache_hits"] == 8
    # what a run spent: the first paid for the replies; the other two asked nothing, whichever cache answered them
    assert first.data.metrics["llm_cost_usd"] == 0 and first.data.metrics["llm_tokens"] > 0  # unpriced
    for again in (second, third):
        assert again.data.metrics["llm_tokens"] == 0 and again.data.metrics["llm_answer_http_requests"] == 0
        assert again.data.metrics["llm_rerank_cache_hits"] == again.data.metrics["llm_rerank_calls"] == 8
    assert first.data.metrics["llm_tokens"] > first.data.metrics["llm_answer_prompt_tokens"]  # rerank tokens count
    assert chunk_ids(first, tmp_path) == chunk_ids(second, tmp_path)


@pytest.mark.slow
def test_a_cross_encoder_from_a_local_folder_reranks_a_run(tmp_path):
    from transformers import BertForSequenceClassification

    from tests.helpers.tiny_models import tiny_bert

    folder = tiny_bert(tmp_path / "cross-encoder", head=BertForSequenceClassification)
    run_cli("flows.cli.evaluate", tmp_path, "setup=knn", "rerank=cross-encoder", f"rerank.model={folder}",
            "rerank.candidates=6", *QUICK)
    (run,) = configuration_runs(tmp_path)
    assert run.data.params["rerank.model"] == str(folder) and run.data.params["rerank.name"] == "cross-encoder"
    assert run.data.metrics["rerank_pairs"] == 18 and run.data.metrics["computed_rerank"] == 1
    assert all(len(ids) == 4 for ids in chunk_ids(run, tmp_path))
