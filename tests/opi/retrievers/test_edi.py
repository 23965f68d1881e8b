"""opi.retrievers.edi: Euclidean distance between bag-of-words count vectors; the nearest chunk first."""
import math

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
