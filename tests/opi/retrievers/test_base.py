"""opi.retrievers.base: ``Ranking`` (its one cut, ``top``, and its constructors), the ``Retriever`` base class, and the
contract every built-in retriever keeps: a ranking to a depth, cut to ``k``, is the ranking to depth ``k``."""
from dataclasses import dataclass

import numpy as np
import pytest

from opi.articles import prepare_articles
from opi.data import Example
from opi.retrievers import (BM25Retriever, DPSRetriever, EDIRetriever, KNNRetriever, MMRRetriever, OracleRetriever,
                            RandomRetriever, Ranking, Retriever, SVMRetriever, TFIDFRetriever)
from opi.retrievers.langchain import LangChainRetriever
from tests.helpers.chunks import make_chunks


# --- Ranking -----------------------------------------------------------------------------------------------------

def test_top_keeps_the_first_k_chunks_and_their_scores():
    ranking = Ranking((4, 1, 7), (0.9, 0.5, 0.1))
    assert ranking.top(2) == Ranking((4, 1), (0.9, 0.5))
    assert ranking.top(10) == ranking  # fewer chunks than k: all of them
    assert ranking.top(None) is ranking  # no cut


def test_from_scores_puts_the_highest_first_and_ties_go_to_the_earlier_chunk():
    # scores by chunk id: 0 -> 0.2, 1 -> 0.7, 2 -> 0.2, 3 -> 0.7, 4 -> 0.9
    ranking = Ranking.from_scores(np.array([0.2, 0.7, 0.2, 0.7, 0.9]), depth=4)
    assert ranking.chunk_ids == (4, 1, 3, 0)
    assert ranking.scores == (0.9, 0.7, 0.7, 0.2)
    assert all(type(i) is int for i in ranking.chunk_ids) and all(type(s) is float for s in ranking.scores)


def test_from_order_keeps_the_order_given_and_looks_scores_up_by_chunk_id():
    ranking = Ranking.from_order([2, 0, 1], [0.5, 0.25, 0.125], depth=2)
    assert ranking == Ranking((2, 0), (0.125, 0.5))


def test_by_position_scores_one_over_the_rank():
    assert Ranking.by_position(np.array([5, 3, 8, 1])) == Ranking((5, 3, 8, 1), (1.0, 0.5, 1 / 3, 0.25))
    assert Ranking.by_position([]) == Ranking((), ())


# --- Retriever -----------------------------------------------------------------------------------------------------

@dataclass
class ByLength(Retriever):
    """Scores a chunk by its length in characters (longer is better): a score-only retriever."""

    name: str = "by-length"

    def score(self, questions, chunks):
        return np.array([[len(c.text) for c in chunks] for _ in questions], dtype=float)


@dataclass
class Nothing(Retriever):
    name: str = "nothing"


CHUNKS = make_chunks(["four", "sixsix", "one", "fivee", "threethree"])  # lengths 4, 6, 3, 5, 10


def test_a_score_only_retriever_gets_rankings_from_its_scores():
    first, second = ByLength().rank(["q1", "q2"], CHUNKS, depth=3)
    assert first == second == Ranking((4, 1, 3), (10.0, 6.0, 5.0))


def test_rank_returns_up_to_depth_chunks_whatever_the_retrievers_k():
    (ranking,) = ByLength(k=1).rank(["q"], CHUNKS, depth=4)
    assert ranking.chunk_ids == (4, 1, 3, 0)  # k=1 is the caller's cut, not the retriever's
    (everything,) = ByLength(k=1).rank(["q"], CHUNKS, depth=50)
    assert len(everything.chunk_ids) == 5


def test_rank_examples_ranks_the_examples_questions():
    examples = [Example("a", "ctx", "first?", "x"), Example("b", "ctx", "second?", "y")]
    assert ByLength().rank_examples(examples, CHUNKS, 2) == ByLength().rank(["first?", "second?"], CHUNKS, 2)


def test_a_retriever_implementing_neither_score_nor_rank_says_so():
    with pytest.raises(NotImplementedError, match="Nothing implements neither score"):
        Nothing().rank(["q"], CHUNKS, 2)


@pytest.mark.parametrize("k", [0, -1, 2.5, "4"])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError, match="k must be >= 1"):
        ByLength(k=k)


def test_an_embedding_retriever_without_an_embedder_names_itself():
    with pytest.raises(ValueError, match="KNNRetriever needs an embedder"):
        KNNRetriever().rank(["q"], CHUNKS, 2)


# --- the contract of every built-in retriever ------------------------------------------------------------------------

DEPTH = 20  # RetrievalConfig.depth's default
KS = (1, 2, 3, 4, 8)
QUESTIONS = ["Who first recorded the harbour of Velmora?", "How many families depended on the foundry?",
             "What does the ledger kept by the bridge clerk list?"]

BUILT_IN = {
    "DPS": lambda embedder: DPSRetriever(embedder=embedder),
    "kNN": lambda embedder: KNNRetriever(embedder=embedder),
    "BM25": lambda embedder: BM25Retriever(),
    "BM25 words": lambda embedder: BM25Retriever(tokenizer="words"),
    "SVM": lambda embedder: SVMRetriever(embedder=embedder),
    "TF-IDF": lambda embedder: TFIDFRetriever(),
    "MMR": lambda embedder: MMRRetriever(embedder=embedder, fetch_k=12),
    "EDI": lambda embedder: EDIRetriever(),
    "Random": lambda embedder: RandomRetriever(random_seed=3),
    "LangChain BM25": lambda embedder: LangChainRetriever(
        factory="langchain_community.retrievers.BM25Retriever.from_documents"),
    "LangChain vector store": lambda embedder: LangChainRetriever(
        vectorstore="langchain_core.vectorstores.InMemoryVectorStore", embedder=embedder),
}


@pytest.fixture(scope="module")
def article(long_article):
    (article,) = prepare_articles([long_article], size=30, overlap=6).values()  # ~40 chunks: real choices
    return article


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_deep_ranking_cut_to_k_is_the_ranking_to_depth_k(name, article, embedder):
    """What lets one ranking serve retriever.k=2,4,8: the cut of a deeper ranking loses nothing and adds nothing."""
    retriever = BUILT_IN[name](embedder)
    chunks = list(article.chunks)
    deep = retriever.rank(QUESTIONS, chunks, DEPTH)
    expected_length = min(DEPTH, 12) if name == "MMR" else DEPTH  # MMR picks among its fetch_k candidates
    for ranking in deep:
        assert len(ranking.chunk_ids) == expected_length == len(set(ranking.chunk_ids)), name
        assert all(0 <= i < len(chunks) for i in ranking.chunk_ids)
    for k in KS:
        assert [r.top(k) for r in deep] == retriever.rank(QUESTIONS, chunks, k), (name, k)
    assert [r.top(DEPTH) for r in retriever.rank(QUESTIONS, chunks, len(chunks))] == deep


def test_the_oracles_deep_ranking_cut_to_k_is_its_ranking_to_depth_k(article):
    sentences = [s.text for s in article.sentences]
    examples = [Example("spread", " ", "Q?", "A.", evidence=tuple(sentences[i] for i in (0, 9, 20, 33, 47, 60))),
                Example("pair", " ", "Q?", "A.", evidence=(sentences[3], sentences[4], sentences[40]))]
    oracle, chunks = OracleRetriever(), list(article.chunks)
    deep = oracle.rank_examples(examples, chunks, DEPTH)
    assert len(deep[0].chunk_ids) >= 4 and len(deep[1].chunk_ids) >= 2  # the cuts below choose something
    for k in KS:
        assert [r.top(k) for r in deep] == oracle.rank_examples(examples, chunks, k), k


@dataclass
class OwnScores(Retriever):
    """A retriever of one's own whose ``score`` returns what it is given."""
    returned: object = None

    def score(self, questions, chunks):
        return self.returned


def test_scores_that_cannot_rank_every_chunk_are_one_line_naming_the_retriever():
    from flows.base.errors import explained
    from opi.retrievers.base import ScoresUnusable

    chunks = make_chunks(["One chunk.", "Two chunk.", "Three chunk."])
    for returned, said in ((np.zeros((1, 2)), r"shape \(1, 2\) for 1 questions and 3 chunks"),
                           ([[0.1, float("nan"), 0.3]], "NaN for 1 of 3 scores"),
                           ([["a", "b", "c"]], "not numbers")):
        with pytest.raises(ScoresUnusable, match=said) as raised:
            OwnScores(returned=returned).rank(["Which?"], chunks, 3)
        assert explained(raised.value).startswith("retriever problem: tests.opi.retrievers.test_base.OwnScores.score")
    ranked = OwnScores(returned=[[0.1, -np.inf, 0.3]]).rank(["Which?"], chunks, 3)
    assert ranked[0].chunk_ids == (2, 0, 1)  # -inf ranks last
