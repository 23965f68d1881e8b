"""Sentence segmentation of an article and the chunk -> complete-sentence expansion.

Segmentation uses pySBD, a rule-based splitter built against the "Golden Rules" sentence-boundary suite: it keeps
abbreviations ("Dr.", "i.e."), decimals ("12.5") and initials inside sentences, is deterministic, needs no model
download, and returns character spans, which we need to map chunks back to the article.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Sentence:
    idx: int
    text: str
    start: int  # character offsets in the article, end exclusive, surrounding whitespace excluded
    end: int


# languages written without spaces between words: their chunks are best measured in characters
UNSPACED_LANGUAGES = ("zh", "ja", "th", "lo", "km", "my")


def has_rules(language: str) -> bool:
    """pySBD has sentence rules for ``language`` (else English's are used: line breaks and . ? ! end sentences)."""
    from pysbd.languages import LANGUAGE_CODES

    return language in LANGUAGE_CODES


@lru_cache(maxsize=8)
def segmenter_key(language: str) -> str:
    """What decides an article's sentences: pySBD's version, the rules used for ``language`` and this module's
    code (a stored segmentation is read back only under the same key)."""
    import hashlib
    from importlib.metadata import version

    rules = language if has_rules(language) else "en"
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return f"pysbd {version('pysbd')} {rules} {code}"


@lru_cache(maxsize=8)
def _segmenter(language: str):
    import pysbd
    from pysbd.utils import TextSpan

    class Segmenter(pysbd.Segmenter):
        """pySBD's segmenter, its sentences located in the text by ``str.find`` instead of one regex compiled per
        sentence (``re.escape(sentence) + r"\s*"``), which was two thirds of its time and, with more sentences than
        ``re``'s cache holds, evicted the patterns pySBD's rules reuse. The same spans: the first occurrence, in
        order, of the sentence and the whitespace after it, that ends after the previous sentence's end."""

        def sentences_with_char_spans(self, sentences):
            text, spans, prior_end = self.original_text, [], 0
            for sentence in sentences:
                if not sentence:  # an empty pattern matches everywhere: pySBD's own search
                    return super().sentences_with_char_spans(sentences)
                at = text.find(sentence)
                while at >= 0:
                    end = at + len(sentence)
                    while end < len(text) and text[end].isspace():
                        end += 1
                    if end > prior_end:
                        spans.append(TextSpan(text[at:end], at, end))
                        prior_end = end
                        break
                    at = text.find(sentence, end)
            return spans

    return Segmenter(language=language if has_rules(language) else "en", clean=False, char_span=True)


def split_sentences(article: str, language: str = "en") -> list[Sentence]:
    """Sentences of ``article`` in order, with their character spans, by pySBD's rules for ``language``.
    Paragraph breaks always end a sentence."""
    sentences: list[Sentence] = []
    offset = 0
    for block in article.split("\n"):
        if block.strip():
            for span in _segmenter(language).segment(block):
                text = span.sent.strip()
                if text:
                    start = offset + span.start + (len(span.sent) - len(span.sent.lstrip()))
                    sentences.append(Sentence(len(sentences), text, start, start + len(text)))
        offset += len(block) + 1
    return sentences


def overlapping_sentences(sentences: list[Sentence], start: int, end: int) -> list[int]:
    """Ids of the sentences that share at least one character with the span [start, end)."""
    return [s.idx for s in sentences if s.start < end and start < s.end]
