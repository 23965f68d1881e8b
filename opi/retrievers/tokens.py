"""Tokens for the word-based retrievers (BM25, TF-IDF, EDI), in any script.

Chinese, Japanese, Thai, Lao and Khmer are written without spaces between words: split on spaces (BM25's
whitespace tokens) or on word characters (scikit-learn's token pattern), a sentence of them is one token, and a
question never matches a chunk. ``split_unspaced`` cuts every run of such a script into overlapping character
bigrams (a single character stays whole), the usual lexical units for these scripts; text in other scripts is left
exactly as it was tokenised, so English rankings do not change.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Iterator

# Thai, Lao, Khmer, Japanese kana, CJK ideographs (and their extensions and compatibility forms)
UNSPACED = re.compile(r"[\u0e00-\u0eff\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# a word: word characters, and every character of the scripts above (Thai, Lao and Khmer vowel and tone marks are
# not word characters to ``re``: ``\w+`` would cut สวัสดี into สว and สด)
_WORD = re.compile(r"[\w\u0e00-\u0eff\u1780-\u17ff]+")


def split_unspaced(tokens: Iterable[str]) -> Iterator[str]:
    for token in tokens:
        if not UNSPACED.search(token):
            yield token
            continue
        position = 0
        for run in UNSPACED.finditer(token):
            if run.start() > position:
                yield token[position:run.start()]
            text = run.group()
            yield from [text] if len(text) == 1 else (text[i:i + 2] for i in range(len(text) - 1))
            position = run.end()
        if position < len(token):
            yield token[position:]


def whitespace(text: str) -> list[str]:
    """LangChain's BM25 tokens (``default_preprocessing_func``: ``str.split``): case and punctuation kept."""
    return list(split_unspaced(text.split()))


def words(text: str) -> list[str]:
    """Lower-cased word tokens: punctuation must not glue to words ("1831." would not match "1831")."""
    return list(split_unspaced(_WORD.findall(text.lower())))


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"whitespace": whitespace, "words": words}


def analyzer(vectorizer) -> Callable[[str], list[str]]:
    """A scikit-learn vectorizer's own analyzer (lower case, its token pattern) on text in spaced scripts; each run of
    a script without spaces cut into bigrams before the token pattern sees it (whose ``\w`` would drop Thai, Lao and
    Khmer vowel and tone marks)."""
    base = vectorizer.build_analyzer()

    def analyze(text: str) -> list[str]:
        if not UNSPACED.search(text):
            return base(text)
        tokens, position = [], 0
        for run in UNSPACED.finditer(text):
            tokens += base(text[position:run.start()])
            tokens += split_unspaced([run.group().lower()])
            position = run.end()
        return tokens + base(text[position:])
    return analyze


def chunk_matrix(vectorizer, texts: list[str]):
    """``vectorizer`` fitted on the chunks' texts and their matrix; None when no chunk has a word (scikit-learn's
    "empty vocabulary": an article of punctuation only), which the retrievers rank by zero scores."""
    try:
        return vectorizer.fit_transform(texts)
    except ValueError as err:
        if "empty vocabulary" not in str(err):
            raise
        return None
