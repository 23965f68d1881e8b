from opi.chunking import chunk_article, word_count
from opi.sentences import split_sentences


def test_paper_chunking_on_a_1000_word_article(long_article):
    assert 900 <= word_count(long_article) <= 1100
    sentences = split_sentences(long_article)
    chunks = chunk_article(long_article, sentences, size=100, overlap=20)
    assert len(chunks) >= 10
    assert all(word_count(c.text) <= 100 for c in chunks)
    for c in chunks:
        assert long_article[c.start:c.end] == c.text
        assert c.text[0] not in ".?!,;", f"chunk {c.idx} starts with punctuation: {c.text[:20]!r}"
    # neighbours inside a paragraph share about 20 words (the overlap never exceeds the configured 20)
    overlaps = []
    for a, b in zip(chunks, chunks[1:]):
        if b.start < a.end:
            overlaps.append(word_count(long_article[b.start:a.end]))
    assert overlaps, "no neighbouring chunks overlap"
    assert all(o <= 20 for o in overlaps)
    assert sum(overlaps) / len(overlaps) >= 10
    covered = {i for c in chunks for i in c.sentence_ids}
    assert covered == {s.idx for s in sentences}


def test_invalid_chunking_parameters_are_rejected(long_article):
    import pytest

    with pytest.raises(ValueError, match="overlap < size"):
        chunk_article(long_article, [], size=50, overlap=50)
