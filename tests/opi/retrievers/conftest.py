"""Bundled articles for the retrievers' identity checks: blocked, sparse and inverted-index rankings against the full
score matrix, in article scope (each article its own index) and corpus scope (every chunk in one index)."""
from dataclasses import dataclass

import pytest

from opi.articles import prepare_articles
from opi.chunking import document_id
from opi.data import load_examples
from opi.schemas import ChunkingConfig, DatasetConfig


@dataclass
class Bundled:
    questions: list[str]
    by_article: list[tuple[list[str], list]]  # each article's questions and chunks
    corpus: list  # every chunk of every article, in order


def bundled(name: str) -> Bundled:
    examples, _ = load_examples(DatasetConfig(name=name))
    chunking = ChunkingConfig()
    articles = prepare_articles([e.context for e in examples], chunking.size, chunking.overlap)
    grouped: dict[str, list[str]] = {}
    for example in examples:
        grouped.setdefault(document_id(example.context), []).append(example.question)
    return Bundled([e.question for e in examples], [(qs, list(articles[d].chunks)) for d, qs in grouped.items()],
                   [c for a in articles.values() for c in a.chunks])


@pytest.fixture(scope="session")
def deeplogic_130() -> Bundled:
    return bundled("deeplogic-130")


@pytest.fixture(scope="session")
def deeplogic_v2() -> Bundled:
    return bundled("deeplogic-v2")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 chunks (the least): a corpus is then ranked in many blocks, merged."""
    monkeypatch.setattr("opi.retrievers.topk.BLOCK_BYTES", 1)
