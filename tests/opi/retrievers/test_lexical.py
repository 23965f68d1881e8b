"""opi.retrievers.lexical: BM25 (rank-bm25's Okapi BM25, LangChain's BM25Retriever) and TF-IDF (scikit-learn,
cosine), checked against hand-computed scores and against LangChain's own retrievers."""
import json
import math
from pathlib import Path

import pytest

from opi.articles import prepare_articles
from opi.retrievers.langchain import chunk_documents
from opi.retrievers.lexical import BM25Retriever, TFIDFRetriever
from opi.retrievers.tokens import TOKENIZERS, whitespace, words
from tests.helpers.chunks import make_chunks


def test_bm25_scores_by_hand():
    chunks = make_chunks(["river bank", "mill mill stone", "wheat"])
    (ranking,) = BM25Retriever().rank(["mill wheat"], chunks, 3)
    # N = 3 chunks, avgdl = (2 + 3 + 1) / 3 = 2; "mill" and "wheat" are each in one chunk: idf = ln(2.5 / 1.5)
    # score = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), k1 = 1.5, b = 0.75
    idf = math.log(2.5 / 1.5)
    wheat = idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 1 / 2))  # = 0.6591
    mill = idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2))  # = 0.6287: twice, but in the longer chunk
    assert ranking.chunk_ids == (2, 1, 0)
    assert ranking.scores == pytest.approx((wheat, mill, 0.0))
    assert wheat == pytest.approx(0.6591, abs=1e-4) and mill == pytest.approx(0.6287, abs=1e-4)


def test_bm25_whitespace_tokens_keep_punctuation_and_words_tokens_do_not():
    chunks = make_chunks(["Zirconium sand arrived.", "Copper ore arrived.", "Sand and ore."])
    (whitespace,) = BM25Retriever().rank(["zirconium?"], chunks, 3)
    (by_words,) = BM25Retriever(tokenizer="words").rank(["zirconium?"], chunks, 3)
    assert whitespace.scores == (0.0, 0.0, 0.0)  # "zirconium?" is no token of "Zirconium sand arrived."
    # words: "zirconium" in one of 3 chunks, each 3 tokens long (dl = avgdl): score = idf = ln(2.5 / 1.5)
    assert by_words.chunk_ids[0] == 0 and by_words.scores[0] == pytest.approx(math.log(2.5 / 1.5))


def test_bm25_ties_come_in_rank_bm25s_get_top_n_order():
    """LangChain's BM25Retriever returns ``get_top_n``: ``np.argsort(scores)[::-1]``, whatever order numpy's sort
    leaves ties in (not the score-based retrievers' earlier-chunk-first)."""
    from rank_bm25 import BM25Okapi

    texts = ["the mill", "a mill", "the quay", "a quay", "the bay"]
    (ranking,) = BM25Retriever().rank(["mill"], make_chunks(texts), 5)
    # "mill": in 2 of 5 chunks, all 2 tokens long (dl = avgdl): score = idf = ln(3.5 / 2.5) for both, 0 for the rest
    assert ranking.scores == pytest.approx((math.log(3.5 / 2.5),) * 2 + (0.0,) * 3)
    index = BM25Okapi([t.split() for t in texts])
    assert [texts[i] for i in ranking.chunk_ids] == index.get_top_n(["mill"], texts, n=5)


def test_words_lower_cases_and_drops_punctuation():
    assert words("Was it 1831? Yes: the Mill-house.") == ["was", "it", "1831", "yes", "the", "mill", "house"]


@pytest.mark.parametrize("settings, message", [
    ({"k1": -0.1}, "k1 must be a finite number >= 0, got -0.1"),
    ({"b": 1.5}, "b must be a finite number in [0, 1], got 1.5"),
    ({"tokenizer": "spacy"}, "tokenizer must be one of ['whitespace', 'words'], got 'spacy'"),
])
def test_bm25_refuses_bad_settings(settings, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        BM25Retriever(**settings)


def test_tfidf_scores_by_hand():
    chunks = make_chunks(["river bank", "mill stone", "mill river"])
    # smooth idf = ln((1 + 3) / (1 + df)) + 1: river, mill (df 2) -> ln(4/3) + 1; bank, stone (df 1) -> ln 2 + 1;
    # rows l2-normalised, cosine with the query's unit vector
    shared, rare = math.log(4 / 3) + 1, math.log(2) + 1
    (mill,) = TFIDFRetriever().rank(["mill"], chunks, 3)
    assert mill.chunk_ids == (2, 1, 0)
    assert mill.scores == pytest.approx((1 / math.sqrt(2), shared / math.hypot(shared, rare), 0.0))  # .7071, .6053
    (rare_words,) = TFIDFRetriever().rank(["stone bank"], chunks, 3)
    # query: stone and bank equally weighted; chunks 0 and 1 tie at rare / hypot(shared, rare) / sqrt(2) = 0.5628
    assert rare_words.chunk_ids == (0, 1, 2)  # a tie goes to the earlier chunk
    assert rare_words.scores[:2] == pytest.approx((0.5628, 0.5628), abs=1e-4)


@pytest.mark.parametrize("cls", [BM25Retriever, TFIDFRetriever])
def test_lexical_retrievers_rank_the_rare_term_first(cls, tiny_chunks):
    (ranking,) = cls().rank(["Where was the zirconium sand kept?"], tiny_chunks, 4)
    assert ranking.chunk_ids[0] == 5


def squad_like_chunks():
    """The real-text fixture's articles, chunked small (real choices), and its punctuation-heavy questions."""
    import dataclasses

    rows = [json.loads(line) for line in (Path(__file__).parents[2] / "data" / "squad_like.jsonl").open()]
    articles = prepare_articles([r["context"] for r in rows], size=20, overlap=4)
    chunks = [c for a in articles.values() for c in a.chunks]
    return [dataclasses.replace(c, idx=i) for i, c in enumerate(chunks)], [r["question"] for r in rows]


def test_bm25_is_langchains_bm25retriever_with_its_defaults():
    from langchain_community.retrievers import BM25Retriever as LangChainBM25

    chunks, questions = squad_like_chunks()
    theirs = LangChainBM25.from_documents(chunk_documents(chunks), k=4)  # LangChain's defaults: whitespace tokens
    ours = BM25Retriever().rank(questions, chunks, 4)
    for question, ranking in zip(questions, ours):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in theirs.invoke(question)), question
    # tokenizer=words is another retriever ("leukosis?" finds "leukosis"), LangChain's given that tokenizer
    by_words = BM25Retriever(tokenizer="words").rank(questions, chunks, 4)
    assert [r.chunk_ids for r in by_words] != [r.chunk_ids for r in ours]
    theirs_by_words = LangChainBM25.from_documents(chunk_documents(chunks), k=4, preprocess_func=words)
    for question, ranking in zip(questions, by_words):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in theirs_by_words.invoke(question)), question


def test_tfidf_is_langchains_tfidfretriever(tiny_chunks):
    from langchain_community.retrievers import TFIDFRetriever as LangChainTFIDF

    # words that occur in several chunks, so that scores differ and no tie-breaking rule decides
    question = "Did the keeper of the lighthouse see the boats in the harbour of the bay?"
    theirs = LangChainTFIDF.from_documents(chunk_documents(tiny_chunks), k=4).invoke(question)
    (ours,) = TFIDFRetriever().rank([question], tiny_chunks, 4)
    assert ours.chunk_ids == tuple(d.metadata["chunk_idx"] for d in theirs)


@pytest.mark.parametrize("retriever", [BM25Retriever(tokenizer="words"), TFIDFRetriever()])
def test_chunks_without_any_word_score_zero_for_every_question(retriever):
    chunks = make_chunks(["...", "!!! ???", "--"])  # scikit-learn: "empty vocabulary"; rank-bm25: a division by 0
    (ranking,) = retriever.rank(["Who built it?"], chunks, 3)
    assert ranking.chunk_ids == (0, 1, 2) and ranking.scores == (0.0, 0.0, 0.0)  # the article's order


def test_bm25s_whitespace_tokens_keep_punctuation_so_such_chunks_have_tokens_that_match_nothing():
    (ranking,) = BM25Retriever().rank(["Who built it?"], make_chunks(["...", "!!! ???", "--"]), 3)
    assert sorted(ranking.chunk_ids) == [0, 1, 2] and set(ranking.scores) == {0.0}


CHINESE = ["北京是中国的首都，有很多历史建筑。", "故宫在北京的中心，每年有很多游客。", "长城离北京不远，你去过长城吗？"]


@pytest.mark.parametrize("cls", [BM25Retriever, TFIDFRetriever])
def test_text_without_spaces_is_tokenised_into_character_bigrams_and_its_terms_are_found(cls):
    # whitespace or word tokens make each sentence one token; bigrams let 故宫 (the Forbidden City) match
    (ranking,) = cls().rank(["故宫在哪里？"], make_chunks(CHINESE), 3)
    assert ranking.chunk_ids[0] == 1 and ranking.scores[0] > ranking.scores[1]


def test_bigrams_of_unspaced_runs_leave_other_tokens_as_they_were():
    assert words("Beijing 北京是首都!") == ["beijing", "北京", "京是", "是首", "首都"]
    assert whitespace("Hello, 故宫。") == ["Hello,", "故宫", "。"]


def full_matrix_tfidf(questions, chunks, depth):
    """TF-IDF as it was ranked before blocks: scikit-learn's whole matrix, a stable sort of each row."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    from opi.retrievers.base import Ranking
    from opi.retrievers.tokens import analyzer

    vectorizer = TfidfVectorizer(analyzer=analyzer(TfidfVectorizer()))
    matrix = vectorizer.fit_transform([c.text for c in chunks])
    return [Ranking.from_scores(row, depth) for row in cosine_similarity(vectorizer.transform(questions), matrix)]


def rank_bm25_rankings(questions, chunks, depth, tokens=whitespace):
    """rank-bm25's scores and LangChain's order (``get_top_n``: ``np.argsort(scores)[::-1]``)."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from opi.retrievers.base import Ranking

    index = BM25Okapi([tokens(c.text) for c in chunks])
    rankings = []
    for question in questions:
        scores = index.get_scores(tokens(question))
        rankings.append(Ranking.from_order(np.argsort(scores)[::-1], scores, depth))
    return rankings


def indexes(data, scope):
    return data.by_article if scope == "article" else [(data.questions, data.corpus)]


@pytest.mark.parametrize("scope", ["article", "corpus"])
def test_tfidf_in_blocks_is_the_full_matrix_ranking_on_the_bundled_set(deeplogic_v2, small_blocks, scope):
    for questions, chunks in indexes(deeplogic_v2, scope):
        assert TFIDFRetriever().rank(questions, chunks, 20) == full_matrix_tfidf(questions, chunks, 20)


@pytest.mark.parametrize("scope", ["article", "corpus"])
def test_bm25_is_rank_bm25_on_the_bundled_set_scores_equal_not_close(deeplogic_130, scope):
    for questions, chunks in indexes(deeplogic_130, scope):
        assert BM25Retriever().rank(questions, chunks, 20) == rank_bm25_rankings(questions, chunks, 20)


HAND_MADE = ["The Mill, by the river.", "the mill? The MILL!", "Mill mill mill", "A quay; the bay.", "the quay.",
             "Bay, bay: BAY?", "", "?!", "the mill", "the mill", "Mill-house (old) 1831.", "1831? In 1831, yes."]


@pytest.mark.parametrize("tokenizer", ["whitespace", "words"])
@pytest.mark.parametrize("question", ["the mill?", "Mill", "mill mill bay", "1831", "quay; the", "nothing here"])
def test_bm25_is_rank_bm25_on_text_with_punctuation_capitals_repeats_and_ties(tokenizer, question):
    chunks = make_chunks(HAND_MADE)  # two chunks repeat ("the mill"), one is empty, one punctuation only
    ours = BM25Retriever(tokenizer=tokenizer).rank([question], chunks, len(chunks))
    assert ours == rank_bm25_rankings([question], chunks, len(chunks), TOKENIZERS[tokenizer])
    for depth in (1, 3):  # a shallower ranking is the deeper one cut
        assert BM25Retriever(tokenizer=tokenizer).rank([question], chunks, depth)[0] == ours[0].top(depth)
