"""Articles as the retrievers see them: each distinct article segmented into complete sentences and chunked once,
or all of them merged into one corpus for corpus-wide retrieval."""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Sequence

from opi.chunking import Chunk, chunk_article, document_id
from opi.sentences import Sentence, split_sentences


@dataclass(frozen=True)
class Article:
    doc_id: str
    sentences: tuple[Sentence, ...]
    chunks: tuple[Chunk, ...]


def prepare_articles(contexts: Sequence[str], size: int, overlap: int, length: str = "words",
                     language: str = "en") -> dict[str, Article]:
    """Segment (pySBD's rules for ``language``) and chunk (``size`` and ``overlap`` in words or characters:
    ``ChunkingConfig``) each distinct article once."""
    articles = {}
    for context in dict.fromkeys(contexts):
        sentences = split_sentences(context, language)
        articles[document_id(context)] = Article(document_id(context), tuple(sentences),
                                                 tuple(chunk_article(context, sentences, size, overlap, length)))
    return articles


def corpus_view(articles: dict[str, Article]) -> dict[str, Article]:
    """Retrieval over the whole corpus: every article id maps to one merged article whose chunks and sentences are
    all articles', renumbered (each chunk keeps its own article's ``doc_id``), so that the retrievers index them
    once and the combinations map chunks back to complete sentences as usual."""
    sentences: list[Sentence] = []
    chunks: list[Chunk] = []
    for article in articles.values():
        offset = len(sentences)
        sentences += [dataclasses.replace(s, idx=s.idx + offset) for s in article.sentences]
        chunks += [dataclasses.replace(c, idx=len(chunks) + i, sentence_ids=tuple(j + offset for j in c.sentence_ids))
                   for i, c in enumerate(article.chunks)]
    corpus_id = "corpus-" + hashlib.sha256(" ".join(articles).encode()).hexdigest()[:16]
    corpus = Article(corpus_id, tuple(sentences), tuple(chunks))
    return {doc_id: corpus for doc_id in articles}
