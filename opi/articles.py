"""Articles as the retrievers see them: each distinct article segmented into complete sentences and chunked once,
or all of them merged into one corpus for corpus-wide retrieval."""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from collections import defaultdict
from typing import TYPE_CHECKING, Sequence

import numpy as np

from opi.chunking import Chunk, chunk_article, document_id
from opi.locate import Locator
from opi.sentences import Sentence, overlapping_sentences, segmenter_key, split_sentences

if TYPE_CHECKING:
    from opi.embeddings.store import EmbeddingStore


@dataclass(frozen=True)
class Article:
    doc_id: str
    sentences: tuple[Sentence, ...]
    chunks: tuple[Chunk, ...]


def prepare_articles(contexts: Sequence[str], size: int, overlap: int, length: str = "words",
                     language: str = "en", store: EmbeddingStore | None = None) -> dict[str, Article]:
    """Segment (pySBD's rules for ``language``) and chunk (``size`` and ``overlap`` in words or characters:
    ``ChunkingConfig``) each distinct article once. Segmenting is most of the work (chunking is ~40x cheaper):
    the sentences of an article segmented once are kept in ``store`` and read back by any later command, whatever
    its chunking, sample or retriever."""
    sentences = segmented(contexts, language, store)
    return {document_id(context): Article(document_id(context), tuple(found), tuple(
        chunk_article(context, found, size, overlap, length))) for context, found in sentences.items()}


@dataclass(frozen=True)
class StoreArticles:
    """Articles whose chunks are a vector store's documents, and how many of its documents are in none of them
    (of those, how many have no text at all)."""
    articles: dict[str, Article]
    documents: int
    not_found: int
    without_text: int = 0

    @property
    def without_documents(self) -> int:
        """Articles none of the store's documents was found in."""
        return sum(not article.chunks for article in self.articles.values())


def store_articles(contexts: Sequence[str], documents: Sequence[tuple[str, str]], language: str = "en",
                   store: EmbeddingStore | None = None) -> StoreArticles:
    """Each distinct article segmented, its chunks the ``documents`` ((id, text): a vector store's, made by another
    splitter) located in it (``opi.locate``: exactly, else with whitespace and case ignored), in the article's
    order, each widened to the sentences it touches as OPI's own chunks are."""
    sentences = segmented(contexts, language, store)
    texts = list(sentences)
    locator, placed, not_found, without_text = Locator(texts), defaultdict(list), 0, 0
    for source, text in documents:
        without_text += not text.strip()
        place = locator.find(text) if text.strip() else None
        if place is None:
            not_found += 1
        else:
            placed[place.article].append((place.start, place.end, source))
    articles = {}
    for i, context in enumerate(texts):
        doc_id = document_id(context)
        chunks = tuple(Chunk(doc_id, idx, context[start:end], start, end,
                             tuple(overlapping_sentences(sentences[context], start, end)), source)
                       for idx, (start, end, source) in enumerate(sorted(placed[i])))
        articles[doc_id] = Article(doc_id, tuple(sentences[context]), chunks)
    return StoreArticles(articles, len(documents), not_found, without_text)


def segmented(contexts: Sequence[str], language: str, store: EmbeddingStore | None) -> dict[str, list[Sentence]]:
    """Each distinct article's sentences: read from ``store`` where it keeps them, else segmented (and kept)."""
    distinct = list(dict.fromkeys(contexts))
    segmenter = segmenter_key(language)
    kept = store.sentence_spans(segmenter, distinct) if store is not None else {}
    found = {context: split_sentences(context, language) for context in distinct if context not in kept}
    if store is not None and found:
        store.put_sentence_spans(segmenter, [(context, np.array([(s.start, s.end) for s in sentences],
                                                                dtype=np.int64).reshape(-1, 2))
                                             for context, sentences in found.items()])
    return {context: found[context] if context in found else [
        Sentence(idx, context[start:end], start, end) for idx, (start, end) in enumerate(kept[context].tolist())]
        for context in distinct}


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
