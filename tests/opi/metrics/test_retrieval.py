"""opi.metrics.retrieval: recall@k, nDCG@k and MRR against the gold evidence, computed by hand."""
import math
import random

import pytest

from opi.articles import Article, corpus_view
from opi.chunking import Chunk, document_id
from opi.data import Example
from opi.metrics.retrieval import ndcg_at, relevant_chunks, retrieval_columns
from opi.retrievers.base import Ranking

CONTEXT = "An article about the Tay bridge."  # its id is the chunks' doc_id; the text itself is not read
TEXTS = ["The bridge opened in 1911.", "It spans the river Tay.", "Trains cross it daily.",
         "The bridge opened in 1911 after delays.", "Repairs finished in 2001."]


def article(context: str, texts: list[str]) -> Article:
    doc_id = document_id(context)
    return Article(doc_id, (), tuple(Chunk(doc_id, i, text, 0, 0, ()) for i, text in enumerate(texts)))


def example(id_: str, *evidence: str, context: str = CONTEXT) -> Example:
    return Example(id_, context, "q", "a", "fuzzy", tuple(evidence))


ARTICLES = {document_id(CONTEXT): article(CONTEXT, TEXTS)}
EXAMPLES = [example("e1", "the bridge opened in 1911"),  # relevant: chunks 0 and 3
            example("e2", "spans the river Tay", "Trains cross it daily"),  # relevant: 1 and 2
            example("e3", "Repairs finished in 2001")]  # relevant: 4
RANKINGS = {"e1": [Ranking.by_position([2, 0, 1, 3, 4])],
            "e2": [Ranking.by_position([1])],  # ranked to depth 1 only
            "e3": [Ranking.by_position([0, 1, 2])]}  # chunk 4 not within the depth
LOG2_3, LOG2_5 = math.log2(3), math.log2(5)


def test_three_examples_by_hand():
    columns = retrieval_columns(EXAMPLES, RANKINGS, ARTICLES, ks=[1, 2, 4])
    assert list(columns) == ["recall_at_1", "recall_at_2", "recall_at_4", "ndcg_at_1", "ndcg_at_2", "ndcg_at_4",
                             "mrr"]
    # e1: relevant {0, 3}; 0 at rank 2, 3 at rank 4. e2: relevant {1, 2}; 1 at rank 1, 2 not ranked. e3: none found
    assert columns["recall_at_1"] == pytest.approx([0.0, 0.5, 0.0])
    assert columns["recall_at_2"] == pytest.approx([0.5, 0.5, 0.0])
    assert columns["recall_at_4"] == pytest.approx([1.0, 0.5, 0.0])  # e2: k deeper than its ranking
    assert columns["mrr"] == pytest.approx([0.5, 1.0, 0.0])
    # ideal DCG with two relevant chunks: 1 + 1/log2(3) = 1.6309 at k >= 2, 1 at k = 1
    assert columns["ndcg_at_1"] == pytest.approx([0.0, 1.0, 0.0])
    # e1 at 2: (1/log2(3)) / (1 + 1/log2(3)) = 0.6309 / 1.6309 = 0.3869; e2 at 2: 1 / 1.6309 = 0.6131
    assert columns["ndcg_at_2"] == pytest.approx([0.38685, 0.61315, 0.0], abs=1e-4)
    assert columns["ndcg_at_2"][0] == pytest.approx((1 / LOG2_3) / (1 + 1 / LOG2_3))
    # e1 at 4: (1/log2(3) + 1/log2(5)) / (1 + 1/log2(3)) = (0.6309 + 0.4307) / 1.6309 = 0.6509;
    # e2 at 4: still 1 / 1.6309 = 0.6131 (the unranked chunk 2 earns nothing)
    assert columns["ndcg_at_4"] == pytest.approx([0.65094, 0.61315, 0.0], abs=1e-4)
    assert columns["ndcg_at_4"][0] == pytest.approx((1 / LOG2_3 + 1 / LOG2_5) / (1 + 1 / LOG2_3))


def test_ndcg_counts_no_chunk_the_ranking_left_out():
    # relevant {1, 4} of 5 chunks, the ranking stops after chunk 1: DCG@5 = 1, ideal 1 + 1/log2(3) -> 0.6131
    assert ndcg_at(Ranking.by_position([1]), {1, 4}, 5, 5) == pytest.approx(1 / (1 + 1 / LOG2_3))
    assert ndcg_at(Ranking.by_position([4, 1]), {1, 4}, 5, 5) == pytest.approx(1.0)


def test_an_unordered_union_reports_recall_over_its_members_top_k():
    members = {"e1": [Ranking.by_position([2, 0]), Ranking.by_position([3, 1])]}
    columns = retrieval_columns(EXAMPLES[:1], members, ARTICLES, ks=[1, 2], ordered=False)
    assert list(columns) == ["recall_at_1", "recall_at_2"]  # no nDCG, no MRR
    # top 1: {2} | {3} -> holds 3 of the relevant {0, 3}: 1/2; top 2: {2, 0} | {3, 1} -> both: 1
    assert columns == {"recall_at_1": [0.5], "recall_at_2": [1.0]}
    with pytest.raises(ValueError, match="one ranking"):
        retrieval_columns(EXAMPLES[:1], members, ARTICLES, ks=[1])


def test_examples_without_evidence_in_a_chunk_get_missing_values_not_zero():
    examples = [example("none"),  # no gold evidence
                example("across", "1911. It spans the river"),  # a piece across a chunk boundary
                example("words", "opened in 191")]  # tokens match whole words only: "191" is not "1911"
    rankings = {e.id: [Ranking.by_position([0, 1, 2])] for e in examples}
    columns = retrieval_columns(examples, rankings, ARTICLES, ks=[2])
    assert columns == {"recall_at_2": [None] * 3, "ndcg_at_2": [None] * 3, "mrr": [None] * 3}
    assert relevant_chunks(example("x", "Opened in 1911!"), ARTICLES[document_id(CONTEXT)]) == {0, 3}


def test_in_a_corpus_view_only_the_examples_own_article_is_relevant():
    other = "Another article that quotes the first."
    corpus = corpus_view({document_id(CONTEXT): article(CONTEXT, TEXTS),
                          document_id(other): article(other, ["The bridge opened in 1911, it is said."])})
    index = corpus[document_id(CONTEXT)]
    assert index is corpus[document_id(other)] and len(index.chunks) == 6  # chunk 5: the other article's
    e1 = EXAMPLES[0]
    assert relevant_chunks(e1, index) == {0, 3}  # not 5, though it holds the same words
    columns = retrieval_columns([e1], {"e1": [Ranking.by_position([5, 3])]}, corpus, ks=[1, 2])
    # 5 is not relevant: 3 at rank 2 -> MRR 1/2, recall@2 1/2, nDCG@2 (1/log2(3)) / (1 + 1/log2(3)) = 0.3869
    assert columns["mrr"] == [0.5] and columns["recall_at_1"] == [0.0] and columns["recall_at_2"] == [0.5]
    assert columns["ndcg_at_2"] == pytest.approx([0.38685], abs=1e-4)
    own = example("o", "The bridge opened in 1911", context=other)
    assert relevant_chunks(own, index) == {5}  # and for the other article's example, only its own chunk


def test_cut_offs_must_be_positive():
    with pytest.raises(ValueError, match="k >= 1"):
        retrieval_columns(EXAMPLES, RANKINGS, ARTICLES, ks=[0])


# --- evidence longer than a chunk (SQuAD's gold paragraphs) -----------------------------------------------------

PARAGRAPH = ("The bridge opened in 1911. It spans the river Tay. Trains cross it daily. Repairs finished in 2001. "
             "Painters came back in 2010.")  # 24 words: longer than every chunk below (at most 8)


def squad_like() -> tuple[list[Example], dict]:
    answered = Example("s1", CONTEXT, "When did repairs finish?", "2001", None, (PARAGRAPH,))
    unanswered = Example("s2", CONTEXT, "What crosses it?", "a ferry", None, (PARAGRAPH,))
    fits = example("s3", "spans the river Tay")  # a piece a chunk holds: as before
    return [answered, unanswered, fits], {e: [Ranking.by_position([2, 4, 0])] for e in ("s1", "s2", "s3")}


def test_evidence_longer_than_every_chunk_is_marked_and_has_no_metrics_under_whole():
    examples, rankings = squad_like()
    columns = retrieval_columns(examples, rankings, ARTICLES, ks=[1, 2])
    assert columns["mrr"] == [None, None, 0.0] and columns["recall_at_2"] == [None, None, 0.0]
    assert columns["evidence_longer_than_chunk"] == [1.0, 1.0, None]
    assert "evidence_longer_than_chunk" not in retrieval_columns(EXAMPLES, RANKINGS, ARTICLES, ks=[1])


def test_under_sentence_a_chunk_holding_a_whole_sentence_of_the_evidence_is_relevant():
    examples, rankings = squad_like()
    index = ARTICLES[document_id(CONTEXT)]
    # the sentence holding the answer 2001: chunk 4 only; no sentence holds "a ferry": any sentence, chunks 0-4
    assert relevant_chunks(examples[0], index, "sentence") == {4}
    assert relevant_chunks(examples[1], index, "sentence") == {0, 1, 2, 3, 4}
    assert relevant_chunks(examples[2], index, "sentence") == relevant_chunks(examples[2], index) == {1}
    columns = retrieval_columns(examples, rankings, ARTICLES, ks=[1, 2], evidence_match="sentence")
    assert columns["mrr"] == [0.5, 1.0, 0.0]  # s1: chunk 4 at rank 2; s2: chunk 2 at rank 1
    assert columns["recall_at_2"] == [1.0, 0.4, 0.0] and "evidence_longer_than_chunk" not in columns
    with pytest.raises(ValueError, match="evidence_match must be one of"):
        retrieval_columns(examples, rankings, ARTICLES, ks=[1], evidence_match="part")


def test_ndcg_by_its_pattern_equals_scikit_learn_on_every_chunk_exactly():
    """``ndcg_at`` scores a ranking by its gains, depth and counts (memoized); the value is scikit-learn's on the
    whole index, with the ranked chunks where they are, to the last bit."""
    from sklearn.metrics import ndcg_score

    rng = random.Random(7)
    for _ in range(1500):
        n_chunks = rng.randint(1, 40)
        depth = rng.randint(1, n_chunks)
        ranked = rng.sample(range(n_chunks), depth)
        relevant = set(rng.sample(range(n_chunks), rng.randint(1, min(n_chunks, 5))))
        k = rng.choice([1, 2, 4, 8, 20])
        padding = max(k - depth, 1)
        y_true = [int(i in relevant) for i in range(n_chunks)] + [0] * padding
        y_score = [0.0] * n_chunks + [0.5] * padding
        for rank, i in enumerate(ranked):
            y_score[i] = float(depth - rank)
        expected = float(ndcg_score([y_true], [y_score], k=k))
        assert ndcg_at(Ranking.by_position(ranked), relevant, n_chunks, k) == expected
