import pytest

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


@pytest.mark.parametrize("size, overlap", [(50, 50), (50, 60), (0, 0), (10, -1)])
def test_invalid_chunking_parameters_are_rejected(long_article, size, overlap):
    with pytest.raises(ValueError, match=f"size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}"):
        chunk_article(long_article, [], size=size, overlap=overlap)


NINE = "One two three. Four five six. Seven eight nine."


def test_chunks_fill_up_to_size_words_at_sentence_ends():
    chunks = chunk_article(NINE, split_sentences(NINE), size=6, overlap=0)
    # 3 + 3 words fit in 6; the third sentence starts the next chunk
    assert [(c.idx, c.text, c.start, c.end, c.sentence_ids) for c in chunks] == [
        (0, "One two three. Four five six.", 0, 29, (0, 1)), (1, "Seven eight nine.", 30, 47, (2,))]
    assert chunk_article(NINE, split_sentences(NINE), size=20, overlap=5)[0].sentence_ids == (0, 1, 2)


def test_the_overlap_repeats_the_previous_chunks_last_words():
    chunks = chunk_article(NINE, split_sentences(NINE), size=6, overlap=3)
    assert [(c.text, c.start, c.sentence_ids) for c in chunks] == [
        ("One two three. Four five six.", 0, (0, 1)), ("Four five six. Seven eight nine.", 15, (1, 2))]
    text = "Alpha beta gamma delta epsilon zeta eta theta."  # one sentence longer than a chunk: cut at spaces
    assert [c.text for c in chunk_article(text, split_sentences(text), size=3, overlap=1)] == [
        "Alpha beta gamma", "gamma delta epsilon", "epsilon zeta eta", "eta theta."]


def test_a_document_id_is_the_start_of_the_texts_sha256_and_words_are_whitespace_separated():
    from opi.chunking import document_id

    assert document_id("abc") == "ba7816bf8f01cfea"  # sha256("abc") = ba7816bf8f01cfea414140de...
    assert word_count("  a b\n c  ") == 3
