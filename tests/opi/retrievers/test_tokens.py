"""Tokens for the word-based retrievers (``opi.retrievers.tokens``): tokens in scripts written with spaces left
exactly as tokenised (case and punctuation kept by ``whitespace``, dropped by ``words``), every run of a script
without spaces (CJK, kana, Thai) cut into overlapping character bigrams with a single character kept whole and the
text around the run kept as its own tokens, scikit-learn's analyzer given the same cut, and an article without any
word an empty vocabulary (None), any other vectorizer error raised. The retrievers' rankings with these tokens are
in ``tests/opi/retrievers/test_lexical.py``."""
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from opi.retrievers.tokens import TOKENIZERS, analyzer, chunk_matrix, split_unspaced, whitespace, words


def test_tokens_of_spaced_scripts_are_left_as_they_were():
    text = "The Mill-house, 1831. Ünter den Linden; 한국어 문장"  # Hangul is written with spaces
    assert whitespace(text) == ["The", "Mill-house,", "1831.", "Ünter", "den", "Linden;", "한국어", "문장"]
    assert words(text) == ["the", "mill", "house", "1831", "ünter", "den", "linden", "한국어", "문장"]
    assert TOKENIZERS == {"whitespace": whitespace, "words": words}


def test_a_run_without_spaces_is_cut_into_overlapping_bigrams_and_one_character_stays_whole():
    assert list(split_unspaced(["北京是首都"])) == ["北京", "京是", "是首", "首都"]  # 5 characters: 4 bigrams
    assert list(split_unspaced(["北"])) == ["北"]
    assert words("東京へ行く") == ["東京", "京へ", "へ行", "行く"]  # kanji and kana: one run


def test_the_text_around_each_run_stays_its_own_token():
    assert whitespace("abc北京def上海x") == ["abc", "北京", "def", "上海", "x"]
    assert whitespace("(故宫)") == ["(", "故宫", ")"]
    assert whitespace("“北京是”") == ["“", "北京", "京是", "”"]  # CJK quotes are no part of the run


def test_thai_and_khmer_tokens_are_bigrams_of_code_points_marks_included():
    # สวัสดี: ส ว ั ส ด ี, the vowel signs are code points of their own, each in the run; to ``re`` they are no word
    # characters, so a plain \w+ cut the word into สว and สด, and scikit-learn's pattern dropped the rest
    bigrams = ["สว", "วั", "ัส", "สด", "ดี"]
    assert whitespace("สวัสดี") == bigrams and words("สวัสดี") == bigrams
    assert analyzer(TfidfVectorizer())("สวัสดี") == bigrams
    assert words("ភាសា") == ["ភា", "ាស", "សា"]  # Khmer: the vowel signs stay


def test_a_scikit_learn_analyzer_lower_cases_and_then_cuts_the_runs():
    tokens = analyzer(TfidfVectorizer())
    assert tokens("Beijing 北京是首都 a") == ["beijing", "北京", "京是", "是首", "首都"]  # "a": below 2 characters
    assert analyzer(CountVectorizer(lowercase=False))("Mill 故宫") == ["Mill", "故宫"]


def test_an_article_without_any_word_has_no_matrix_and_other_errors_are_raised():
    assert chunk_matrix(CountVectorizer(), ["...", "!!! ???"]) is None
    matrix = chunk_matrix(CountVectorizer(), ["mill stone", "mill"])
    assert matrix.toarray().tolist() == [[1, 1], [1, 0]]  # columns: mill, stone
    with pytest.raises(ValueError, match="max_df corresponds to < documents than min_df"):
        chunk_matrix(CountVectorizer(min_df=2, max_df=1), ["mill stone", "mill"])
