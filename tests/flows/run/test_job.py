"""What a configuration's job says when it ends: its scores, and one line per failure that was counted."""
from flows.run.job import coverage_line, failure_lines, scores_line


def test_every_counted_failure_is_one_line_and_a_clean_run_says_none():
    lines = failure_lines({"answers_missing": 6, "parse_failures": 2, "unknown_relations": 3, "judge_failures": 0,
                           "correctness_failures": 1}, 20)
    assert lines == [
        "6 of 20 questions got no answer (the LLM's reply was empty or a refusal, also when asked again): left out "
        "of BERTSim, LRCR and OPI",
        "2 of 20 relation replies could not be parsed (asked again, then recorded as 'unknown', which counts as wrong)",
        "1 of 20 answer-correctness replies could not be parsed: left out of its average",
        "1 of 20 answers got the relation 'unknown' (counted as wrong)"]
    assert failure_lines({"bertsim": 0.5, "unknown_relations": 0}, 20) == []


def test_the_scores_line_says_when_there_are_no_relations():
    assert scores_line({"bertsim": 0.5, "lrcr": 0.25, "opi_1": 1 / 3}) == "BERTSim 0.5000  LRCR 0.2500  OPI-1 0.3333"
    assert scores_line({"bertsim": 0.5}) == "BERTSim 0.5000  (no gold relations: no LRCR or OPI)"


def test_a_reranker_that_scored_nothing_says_the_reranking_did_nothing():
    assert failure_lines({"rerank_pairs": 65, "rerank_unscored": 65, "rerank_parse_failures": 65}, 13) == [
        "all 65 reranker candidates got no score (65 replies could not be parsed, also when asked again): the "
        "reranking did nothing, the order is the retriever's"]
    assert failure_lines({"rerank_pairs": 65, "rerank_unscored": 5}, 13) == [
        "5 of 65 reranker candidates got no score (the reranker gave no score): they follow the scored ones, in the "
        "retriever's order"]
    assert failure_lines({"rerank_pairs": 65, "rerank_unscored": 0, "rerank_parse_failures": 0}, 13) == []


def test_replies_cut_for_ignoring_max_tokens_are_one_line_per_stage():
    assert failure_lines({"llm_answer_overlong_replies": 3, "llm_classify_overlong_replies": 0}, 20) == [
        "3 answer replies were far longer than llm.max_tokens allows (the endpoint ignores it): cut to about "
        "max_tokens (4 characters a token)"]


def test_an_llm_reranker_whose_replies_are_all_garbage_is_counted_and_said(tmp_path):
    from flows.orchestration import tasks
    from opi.articles import prepare_articles
    from opi.data import Example
    from opi.rerankers import LLMReranker
    from opi.retrievers.base import Ranking
    from opi.schemas import LLMConfig
    from tests.helpers.fake_openai import FakeOpenAI

    article = " ".join(f"Keeper {i} of the harbour was born in {1800 + i}." for i in range(12))
    articles = prepare_articles([article], size=10, overlap=0)
    examples = [Example("a", article, "When was keeper 3 born?", "1803"),
                Example("b", article, "When was keeper 7 born?", "1807")]
    pools = {"a": Ranking.by_position((0, 1, 2)), "b": Ranking.by_position((3, 2))}
    with FakeOpenAI() as server:  # without structured output the fake answers in prose: no relevance to read
        llm = LLMConfig(name="fake", reader=None, model="fake", base_url=server.base_url, api_key_env=None,
                        structured_output=False, timeout=5, max_retries=0, deadline=30)
        result = tasks.rerank.fn(LLMReranker(candidates=3, parse_retries=1), pools, examples, articles, llm,
                                 str(tmp_path / "calls.sqlite"), None)
        assert len(server.bodies) == 10  # 5 pairs, each asked again once
    assert result.counts == {"rerank_pairs": 5.0, "rerank_unscored": 5.0, "rerank_parse_failures": 5.0}
    assert {e: r.chunk_ids for e, r in result.rankings.items()} == {"a": (0, 1, 2), "b": (3, 2)}
    assert failure_lines({**result.counts, **result.usage}, 2) == [
        "all 5 reranker candidates got no score (5 replies could not be parsed, also when asked again): the "
        "reranking did nothing, the order is the retriever's"]


def test_retrieval_metrics_that_cover_only_some_examples_say_why():
    from opi.schemas import ChunkingConfig

    line = coverage_line({"retrieval_examples": 29, "retrieval_evidence_too_long": 31}, 60, ChunkingConfig())
    assert line == ("retrieval metrics cover 29 of 60 examples: 31 have evidence longer than a chunk "
                    "(chunking.size=100 words); metrics.evidence_match=sentence counts a chunk that holds a whole "
                    "sentence of it")
    assert coverage_line({"retrieval_examples": 55, "retrieval_evidence_too_long": 3}, 60, ChunkingConfig(),
                         "sentence") == (
        "retrieval metrics cover 55 of 60 examples: 3 have evidence longer than a chunk (chunking.size=100 words), "
        "2 have no evidence a chunk holds (none given, across a chunk boundary, or no chunk of their article)")
    assert coverage_line({"retrieval_evidence_too_long": 60}, 60, ChunkingConfig(size=50), "sentence") == (
        "retrieval metrics cover 0 of 60 examples: 60 have evidence longer than a chunk (chunking.size=50 words)")
    assert coverage_line({"retrieval_examples": 60}, 60, ChunkingConfig()) is None
    assert coverage_line({"bertsim": 0.5}, 60, ChunkingConfig()) is None  # no evidence anywhere: no such metrics
