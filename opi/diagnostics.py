"""Retrieval diagnostics per example: did the retrieved sentences hold what the answer needs?

They need no reader and no relation labels, so they also judge retrieval under the offline defaults.
- ``support_recall``: share of the ground-truth answer's content words (lower-cased word tokens outside
  scikit-learn's English stop words) found among the retrieved sentences' words; 1.0 for an answer with none.
- ``answer_found``: the whole ground-truth answer occurs in the complete sentences handed to the reader, word for
  word (case, spacing and punctuation between words ignored); ``opi.predictions`` also tests the retrieved chunks
  themselves (``answer_in_chunks``).
- ``evidence_hit`` / ``evidence_recall``: where the dataset gives gold evidence (verbatim sentences, or SQuAD's
  paragraph), whether all of it / what share of it is inside the retrieved text (hit@k on the evidence);
  missing when the example has none.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

COLUMNS = ("support_recall", "answer_found", "evidence_recall", "evidence_hit")  # what ``diagnose`` returns
WORD = re.compile(r"[a-z0-9]+(?:['.,][a-z0-9]+)*")


# Per text, cached: the same sentences and answers come back in every configuration of a sweep. No token spans a
# space, so the tokens of sentences joined by spaces are the sentences' tokens in order.
@lru_cache(maxsize=1 << 16)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(WORD.findall(text.lower()))


@lru_cache(maxsize=1 << 16)
def content_words(text: str) -> frozenset[str]:
    stop_words = _stop_words()
    return frozenset(w for w in _tokens(text) if w not in stop_words)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    # imported on first use: a warm re-run needs no scikit-learn, and importing it costs every command ~1.5 s
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


def normalized(text: str) -> str:
    """Lower-cased word tokens between single spaces, padded: substring tests then match whole words only
    ("no" is not found in "north", nor "1911" in "19110")."""
    return _normalized_all((text,))


def _normalized_all(texts: Sequence[str]) -> str:
    return " " + " ".join(token for text in texts for token in _tokens(text)) + " "


def support_recall(answer: str, retrieved: Sequence[str]) -> float:
    wanted = content_words(answer)
    if not wanted:
        return 1.0
    return len(wanted & frozenset().union(*map(content_words, retrieved))) / len(wanted)


def answer_found(answer: str, retrieved: Sequence[str]) -> bool:
    return normalized(answer) in _normalized_all(retrieved)


def evidence_recall(evidence: Sequence[str], retrieved: Sequence[str]) -> float | None:
    if not evidence:
        return None
    text = _normalized_all(retrieved)
    return sum(normalized(piece) in text for piece in evidence) / len(evidence)


def diagnose(answer: str, evidence: Sequence[str], retrieved: Sequence[str]) -> dict[str, float | None]:
    recall = evidence_recall(evidence, retrieved)
    return {"support_recall": support_recall(answer, retrieved),
            "answer_found": float(answer_found(answer, retrieved)),
            "evidence_recall": recall, "evidence_hit": None if recall is None else float(recall == 1.0)}
