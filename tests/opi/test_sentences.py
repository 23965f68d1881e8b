from opi.sentences import overlapping_sentences, split_sentences


def test_split_keeps_abbreviations_and_decimals_inside_sentences():
    text = "Dr. Rook measured 2.5 tonnes, i.e. a lot. Was it enough? No!\n\nA new paragraph starts here"
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == [
        "Dr. Rook measured 2.5 tonnes, i.e. a lot.", "Was it enough?", "No!", "A new paragraph starts here"]
    for s in sentences:
        assert text[s.start:s.end] == s.text


def test_a_span_touches_every_sentence_it_shares_a_character_with():
    text = "One two three. Four five six. Seven eight nine."
    sentences = split_sentences(text)
    assert [(s.start, s.end) for s in sentences] == [(0, 14), (15, 29), (30, 47)]
    # a span covering the end of sentence 0 and the start of sentence 1 touches both
    assert overlapping_sentences(sentences, 10, 20) == [0, 1]
    assert overlapping_sentences(sentences, 14, 15) == []  # the space between them: neither
    assert overlapping_sentences(sentences, 13, 14) == [0]  # the full stop: sentence 0 (end exclusive)
    assert overlapping_sentences(sentences, 0, 47) == [0, 1, 2]


def test_paragraph_breaks_end_a_sentence_and_offsets_count_them():
    text = "A line without a full stop\nThe next line.\n\n  Indented after a blank line."
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == ["A line without a full stop", "The next line.",
                                           "Indented after a blank line."]
    assert all(text[s.start:s.end] == s.text for s in sentences) and [s.idx for s in sentences] == [0, 1, 2]
    assert split_sentences("  \n\n ") == []


def test_the_languages_rules_end_sentences_at_its_own_punctuation():
    text = "北京是中国的首都。它有很多历史建筑！你去过吗？"
    assert [s.text for s in split_sentences(text, "zh")] == ["北京是中国的首都。", "它有很多历史建筑！", "你去过吗？"]
    assert [s.text for s in split_sentences("Eins. Zwei.", "th")] == ["Eins.", "Zwei."]  # no rules: English's


def pysbd_spans(text: str, language: str = "en") -> list[tuple[int, int, str]]:
    import pysbd

    segmenter = pysbd.Segmenter(language=language, clean=False, char_span=True)
    return [(span.start, span.end, span.sent) for span in segmenter.segment(text)]


def our_spans(text: str, language: str = "en") -> list[tuple[int, int, str]]:
    from opi.sentences import _segmenter

    return [(span.start, span.end, span.sent) for span in _segmenter(language).segment(text)]


def test_sentences_are_located_where_pysbds_own_search_puts_them():
    import json
    from pathlib import Path

    import opi

    tricky = [
        "Yes. No. Yes. No. Yes.",  # a sentence that recurs: each copy after the one before
        "It ended. It ended.\u00a0It ended.\u2003Then it began again.",  # Unicode whitespace after a sentence
        "Dr. Who? Dr. Who!  Dr. Who.   ",  # trailing spaces
        "He said (a) one, (b) two. 1. First item 2. Second item. Mr. Smith arrived at 5 p.m. today.",
    ]
    folder = Path(opi.__file__).parent / "datasets"
    articles = [json.loads(line)["context"] for name in ("deeplogic-v2", "deeplogic-130")
                for line in (folder / name / "articles.jsonl").read_text().splitlines()]
    blocks = [block for text in tricky + articles for block in text.split("\n") if block.strip()]
    assert len(blocks) > 300
    for block in blocks:
        assert our_spans(block) == pysbd_spans(block), block
    assert our_spans("Uno. Dos. Uno.", "es") == pysbd_spans("Uno. Dos. Uno.", "es")
