from opi.sentences import join_sentences, overlapping_sentences, split_sentences


def test_split_keeps_abbreviations_and_decimals_inside_sentences():
    text = "Dr. Rook measured 2.5 tonnes, i.e. a lot. Was it enough? No!\n\nA new paragraph starts here"
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == [
        "Dr. Rook measured 2.5 tonnes, i.e. a lot.", "Was it enough?", "No!", "A new paragraph starts here"]
    for s in sentences:
        assert text[s.start:s.end] == s.text


def test_overlap_and_expand_give_complete_sentences_in_article_order():
    text = "One two three. Four five six. Seven eight nine."
    sentences = split_sentences(text)
    # a span covering the end of sentence 0 and the start of sentence 1 touches both
    assert overlapping_sentences(sentences, 10, 20) == [0, 1]
    assert join_sentences(sentences, [0, 2]) == "One two three. Seven eight nine."
