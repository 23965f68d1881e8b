"""opi.retrievers.edi: Euclidean distance between bag-of-words count vectors; the nearest chunk first."""
import math

import pytest

from opi.retrievers import EDIRetriever
from tests.helpers.chunks import make_chunks


def test_edi_distances_by_hand():
    chunks = make_chunks(["copper mine closed", "copper mine copper mine paid", "harbour boats"])
    (ranking,) = EDIRetriever().rank(["copper mine"], chunks, 3)
    # counts over (boats, closed, copper, harbour, mine, paid); question (0, 0, 1, 0, 1, 0)
    # chunk 0 (0, 1, 1, 0, 1, 0): distance 1; chunk 1 (0, 0, 2, 0, 2, 1): sqrt(1 + 1 + 1); chunk 2: sqrt(4)
    assert ranking.chunk_ids == (0, 1, 2)
    assert ranking.scores == (-1.0, -math.sqrt(3), -2.0)


def test_edi_prefers_the_short_chunk_sharing_the_query_words(tiny_chunks):
    (ranking,) = EDIRetriever().rank(["copper mine"], tiny_chunks, len(tiny_chunks))
    assert ranking.chunk_ids[0] == 3  # "The copper mine closed."
    # the long chunk says "copper mine" twice yet ranks last: its length puts it far from the short query
    assert ranking.chunk_ids[-1] == 4


def test_chunks_without_any_word_score_zero_for_every_question():
    (ranking,) = EDIRetriever().rank(["Who built it?"], make_chunks(["...", "!!!"]), 2)
    assert ranking.chunk_ids == (0, 1) and ranking.scores == (0.0, 0.0)


def full_matrix_edi(questions, chunks, depth):
    """EDI as it was ranked before blocks: scikit-learn's whole distance matrix, a stable sort of each row."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.metrics.pairwise import euclidean_distances

    from opi.retrievers.base import Ranking
    from opi.retrievers.tokens import analyzer

    vectorizer = CountVectorizer(analyzer=analyzer(CountVectorizer()))
    matrix = vectorizer.fit_transform([c.text for c in chunks])
    distances = euclidean_distances(vectorizer.transform(questions), matrix)
    return [Ranking.from_scores(-row, depth) for row in distances]


@pytest.mark.parametrize("scope", ["article", "corpus"])
def test_edi_in_blocks_is_the_full_matrix_ranking_on_the_bundled_set(deeplogic_v2, small_blocks, scope):
    indexes = deeplogic_v2.by_article if scope == "article" else [(deeplogic_v2.questions, deeplogic_v2.corpus)]
    for questions, chunks in indexes:
        assert EDIRetriever().rank(questions, chunks, 20) == full_matrix_edi(questions, chunks, 20)
