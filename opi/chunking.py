"""Chunking with LangChain's RecursiveCharacterTextSplitter, length measured in words (the paper's setting).

The sentence-end separator is a look-behind regex, so the split happens in the whitespace *after* ``.``, ``?`` or
``!``: punctuation stays with its sentence instead of moving to the start of the next chunk (what the plain
``"."`` separator with ``keep_separator=True`` does).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from opi.sentences import Sentence, overlapping_sentences

PAPER_SEPARATORS = ["\n\n", "\n", r"(?<=[.?!])\s+", " "]
# text without spaces: after a sentence's end (also the ideographic 。！？), then anywhere
CHARACTER_SEPARATORS = ["\n\n", "\n", r"(?<=[.?!])\s+", r"(?<=[。！？])", " ", ""]


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    idx: int
    text: str
    start: int
    end: int
    sentence_ids: tuple[int, ...]
    source: str | None = None  # the vector store document it is (``opi.articles.store_articles``); None: OPI's chunk


def word_count(text: str) -> int:
    return len(text.split())


LENGTHS = {"words": word_count, "characters": len}  # what chunking.length measures


def document_id(article: str) -> str:
    """Content address of an article: equal texts share chunks, indexes and embeddings."""
    return hashlib.sha256(article.encode("utf-8")).hexdigest()[:16]


def chunk_article(article: str, sentences: list[Sentence], size: int, overlap: int, length: str = "words",
                  separators: list[str] | None = None) -> list[Chunk]:
    """Split ``article`` into chunks of at most ``size`` words (or characters) overlapping by about ``overlap``."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(f"chunking needs size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, length_function=LENGTHS[length],
        separators=separators or (PAPER_SEPARATORS if length == "words" else CHARACTER_SEPARATORS),
        is_separator_regex=True,
    )
    doc_id = document_id(article)
    chunks: list[Chunk] = []
    cursor = 0
    # LangChain's add_start_index subtracts chunk_overlap as *characters*, wrong with a word length; chunks come
    # in article order and each starts after the previous one's start, so a forward search finds the true offset.
    for idx, text in enumerate(splitter.split_text(article)):
        start = article.find(text, cursor)
        if start < 0:
            raise RuntimeError(f"chunk {idx} is not a substring of the article; splitter changed the text")
        end = start + len(text)
        chunks.append(Chunk(doc_id, idx, text, start, end, tuple(overlapping_sentences(sentences, start, end))))
        cursor = start + 1
    return chunks
