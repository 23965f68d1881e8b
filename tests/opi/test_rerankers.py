"""opi.rerankers: a ranking reordered by its candidates' scores (ties and unscored candidates keep the retriever's
order), the A- candidate pool, the LLM reranker against the fake endpoint (its replies cached), a cross-encoder
loaded from a local folder, and the config checks of the rerank group."""
import math

import pytest

from flows.run.config import compose_config, typed
from opi.articles import prepare_articles
from opi.chunking import document_id
from opi.combine import RankFusion, SentenceUnion, Single, reciprocal_rank_fusion
from opi.data import Example
from opi.llm.cache import CallCache
from opi.llm.client import ChatClient
from opi.rerankers import (CrossEncoderReranker, LLMReranker, NoReranker, candidate_pools, parse_relevance,
                           rerank_examples, reranked, reranks)
from opi.retrievers.base import Ranking
from opi.schemas import LLMConfig
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.paths import ROOT
from tests.helpers.toy_components import ReversingReranker

ARTICLE = " ".join(f"Sentence {i} names the harbour keeper number {i}." for i in range(30))


def ranking(*chunk_ids: int) -> Ranking:
    return Ranking.by_position(chunk_ids)


def test_candidates_are_sorted_by_score_and_ties_keep_the_retrievers_order():
    result = reranked(ranking(7, 3, 5, 1), [0.2, 0.9, 0.2, 0.5])
    assert result.chunk_ids == (3, 1, 7, 5) and result.scores == (0.9, 0.5, 0.2, 0.2)


def test_candidates_without_a_score_go_last_in_the_retrievers_order():
    result = reranked(ranking(7, 3, 5, 1), [None, 1.0, math.nan, 0.0])
    assert result.chunk_ids == (3, 1, 7, 5)
    assert result.scores[:2] == (1.0, 0.0) and all(math.isnan(s) for s in result.scores[2:])


def test_a_score_per_candidate_is_required():
    with pytest.raises(ValueError, match="2 scores for 3 candidates"):
        reranked(ranking(1, 2, 3), [1.0, 2.0])


def test_the_a_pool_is_the_fusion_of_the_members_cut_to_candidates():
    knn, bm25 = {"e": ranking(1, 2, 3, 4, 5)}, {"e": ranking(5, 6, 1, 7, 8)}
    fusion = RankFusion(members=["knn", "bm25"], k=2)
    pools = candidate_pools(fusion, [knn, bm25], 3)
    expected = reciprocal_rank_fusion([knn["e"].top(3), bm25["e"].top(3)], None, 60, 3)
    assert pools == {"e": expected} and len(expected.chunk_ids) == 3
    assert candidate_pools(SentenceUnion(members=["knn", "bm25"]), [knn, bm25], 3) is None  # no order of its own
    assert candidate_pools(Single(), [knn], 2) == {"e": knn["e"].top(2)}  # a single retriever's own ranking


def test_rerank_examples_reads_each_candidates_chunk_text():
    articles = prepare_articles([ARTICLE], size=10, overlap=2)
    chunks = articles[document_id(ARTICLE)].chunks
    examples = [Example("a", ARTICLE, "Who is keeper 3?", "3"), Example("b", ARTICLE, "Who is keeper 9?", "9")]

    class FirstUnscored:  # any object with scores(): no base class needed
        def scores(self, question, texts):
            assert all(text in [c.text for c in chunks] for text in texts)
            return [None, *(float(len(text)) for text in texts[1:])]

    pools = {"a": ranking(0, 1, 2), "b": ranking(2, 3)}
    result, unscored = rerank_examples(FirstUnscored(), pools, examples, articles)
    assert set(result) == {"a", "b"} and unscored == 2
    assert result["a"].chunk_ids[-1] == 0 and result["b"].chunk_ids == (3, 2)
    assert ReversingReranker(candidates=3).score_many(["q"], [["x", "y", "z"]]) == [[0.0, 1.0, 2.0]]
    assert rerank_examples(ReversingReranker(), pools, examples, articles)[0]["a"].chunk_ids == (2, 1, 0)


@pytest.mark.parametrize("reply, score", [('{"relevance": 7}', 7.0), ('Sure: {"relevance": 3} ok', 3.0), ("10", 10.0),
                                          ('{"relevance": 11}', None), ('{"relevance": true}', None), ("high", None)])
def test_a_relevance_is_read_from_json_or_a_bare_number_on_the_scale(reply, score):
    assert parse_relevance(reply) == score


def llm_settings(base_url: str) -> LLMConfig:
    return LLMConfig(name="fake", reader=None, model="fake-model", base_url=base_url, api_key_env=None, timeout=5,
                     max_retries=1, deadline=30)


def test_the_llm_reranker_rates_each_pair_and_a_second_run_is_answered_by_the_call_cache(tmp_path):
    questions, texts = ["Who keeps the harbour?", "When?"], [["the keeper", "a bird", "a ship"], ["in 1800", "never"]]
    with FakeOpenAI() as server:
        client = ChatClient(llm_settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        scores = LLMReranker(client=client).score_many(questions, texts)
        asked = len(server.bodies)
        again = ChatClient(llm_settings(server.base_url), CallCache(tmp_path / "calls.sqlite"))
        assert LLMReranker(client=again).score_many(questions, texts) == scores
        assert len(server.bodies) == asked == 5
    assert [len(s) for s in scores] == [3, 2] and all(s in range(11) for row in scores for s in row)
    assert again.usage.http_requests == 0 and again.usage.cache_hits == 5
    prompts = [body["messages"][-1]["content"] for body in server.bodies]
    assert sum("Who keeps the harbour?" in p and "Passage:\nthe keeper\n" in p for p in prompts) == 1
    schema = server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["relevance"]["enum"] == list(range(11))


def test_the_llm_reranker_needs_a_client():
    with pytest.raises(ValueError, match="needs the run's LLM client"):
        LLMReranker().score_many(["q"], [["t"]])


def test_a_cross_encoder_from_a_local_folder_scores_every_pair_in_one_call(tmp_path):
    from sentence_transformers import CrossEncoder
    from transformers import BertForSequenceClassification

    from tests.helpers.tiny_models import tiny_bert

    folder = tiny_bert(tmp_path / "ce", head=BertForSequenceClassification)
    reranker = CrossEncoderReranker(model=str(folder), candidates=3)
    questions, texts = ["who keeps the harbour", "when"], [["the keeper", "a bird", "a ship"], ["in 1800", "never"]]
    scores = reranker.score_many(questions, texts)
    direct = CrossEncoder(str(folder), device="cpu").predict([(q, t) for q, ts in zip(questions, texts) for t in ts])
    assert [len(s) for s in scores] == [3, 2]
    assert [s for row in scores for s in row] == pytest.approx([float(s) for s in direct], abs=1e-6)
    key = reranker.content_key()
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    assert reranker.content_key() != key  # the cache follows the model's files, not the folder's name


@pytest.mark.parametrize("settings, message", [
    (dict(candidates=0), "candidates must be >= 1"), (dict(batch_size=0), "batch_size must be >= 1"),
    (dict(max_length=0), "max_length must be >= 1 or null")])
def test_cross_encoder_settings_are_checked(settings, message):
    with pytest.raises(ValueError, match=message):
        CrossEncoderReranker(**settings)


REQUIRED = {"llm": ["llm=gpt-4o"], "custom": ["rerank._target_=tests.helpers.toy_components.ReversingReranker"]}


@pytest.mark.parametrize("option", sorted(p.stem for p in (ROOT / "conf" / "rerank").glob("*.yaml")))
def test_every_rerank_option_composes_and_checks(option):
    config = typed(compose_config([f"rerank={option}", *REQUIRED.get(option, [])]))
    assert reranks(config.rerank) == (option != "none") and config.rerank.name


def test_none_is_the_default_and_changes_nothing():
    config = typed(compose_config([]))
    assert isinstance(config.rerank, NoReranker) and not reranks(config.rerank)
    assert reranks(typed(compose_config(["rerank=cross-encoder"])).rerank)


@pytest.mark.parametrize("overrides, message", [
    (["rerank=cross-encoder", "rerank.candidates=3"], r"rerank.candidates \(3\) is smaller than retriever.k \(4\)"),
    (["setup=a_two", "rerank=cross-encoder", "rerank.candidates=2", "combination.k=3"],
     r"smaller than combination.k \(3\)"),
    (["setup=s_two", "rerank=cross-encoder", "rerank.candidates=3"], r"smaller than retrievers.knn.k \(4\)"),
    (["rerank=llm"], "the reranker llm-rerank send requests through the configured LLM endpoint"),
])
def test_settings_that_cannot_work_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        typed(compose_config(overrides))


def test_a_setting_none_does_not_have_fails_while_composing():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        compose_config(["rerank.candidates=5"])
