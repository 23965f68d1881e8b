"""Recompute a bundled dataset's datasheet figures from its files (default: deeplogic-v2).

    python benchmarks/dataset_card.py [--name deeplogic-v2] [--json card.json]

Counts; words, paragraphs and chunks per article at the paper's chunking; k=4 coverage; how often 4 random chunks,
and BM25's top 4, hold all of an example's evidence; the question-only held-out-article baseline (naive Bayes on
question word 1-3-grams, trained on every other article); agreement of the second labelling pass with the first
(Cohen's kappa, confusion); invented names shared between articles. `tests/test_bundled_dataset.py` asserts the
targets on the same functions.
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

K = 4


def read(folder: Path, name: str) -> list[dict]:
    path = folder / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def random_all_evidence(evidence_chunks: list[set[int]], n_chunks: int, k: int = K) -> float:
    """Exact probability that k chunks drawn at random hold every evidence sentence (each in one of its chunks)."""
    combos = list(itertools.combinations(range(n_chunks), min(k, n_chunks)))
    return sum(all(chunks & set(c) for chunks in evidence_chunks) for c in combos) / len(combos)


def question_only_baseline(examples: list[dict]) -> float:
    """Accuracy of naive Bayes on question n-grams, each article's questions predicted by a model of the others."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import make_pipeline

    labels = np.array([e["relation"] for e in examples])
    predicted = cross_val_predict(make_pipeline(CountVectorizer(ngram_range=(1, 3)), MultinomialNB()),
                                  [e["question"] for e in examples], labels,
                                  groups=[e["article_id"] for e in examples], cv=LeaveOneGroupOut())
    return float(np.mean(predicted == labels))


def shared_names(articles: list[dict]) -> dict[str, list[str]]:
    """Capitalised words inside sentences (not sentence-initial) that occur in more than one article and in no
    English word list we have: invented names reused across articles."""
    import calendar

    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    dates = {*calendar.month_name[1:], *calendar.day_name, *(d + "s" for d in calendar.day_name)}
    seen: dict[str, set[str]] = {}
    for article in articles:
        for word in set(re.findall(r"(?<=[a-z,;] )[A-Z][a-z]{3,}", article["context"])):
            seen.setdefault(word, set()).add(article["article_id"])
    lower = Counter(w for a in articles for w in re.findall(r"\b[a-z]{4,}\b", a["context"]))
    return {w: sorted(ids) for w, ids in seen.items() if len(ids) > 1 and w.lower() not in lower
            and w.lower() not in ENGLISH_STOP_WORDS and w not in dates}


def card(name: str) -> dict:
    from opi.data import bundled_path
    from opi.articles import prepare_articles
    from opi.schemas import ChunkingConfig
    from opi.retrievers.lexical import BM25Retriever
    from opi.chunking import document_id

    folder = bundled_path(name)
    articles, examples = read(folder, "articles.jsonl"), read(folder, "examples.jsonl")
    chunking = ChunkingConfig()  # the paper's
    prepared = prepare_articles([a["context"] for a in articles], chunking.size, chunking.overlap)
    by_id = {a["article_id"]: prepared[document_id(a["context"])] for a in articles}
    chunks_per_article = [len(p.chunks) for p in by_id.values()]
    words = [len(a["context"].split()) for a in articles]
    paragraphs = [len([p for p in a["context"].split("\n\n") if p.strip()]) for a in articles]
    bm25 = BM25Retriever(k=K)
    random_rates, bm25_hits, spread = [], [], []
    for article_id, group in itertools.groupby(examples, key=lambda e: e["article_id"]):
        group, article = list(group), by_id[article_id]
        sentence_of = {s.text: s.idx for s in article.sentences}
        rankings = [r.top(K) for r in bm25.rank([e["question"] for e in group], list(article.chunks), K)]
        for example, ranking in zip(group, rankings):
            ids = [sentence_of[s] for s in example["evidence"]]
            chunks_of = [{c.idx for c in article.chunks if i in c.sentence_ids} for i in ids]
            random_rates.append(random_all_evidence(chunks_of, len(article.chunks)))
            covered = {i for c in ranking.chunk_ids for i in article.chunks[c].sentence_ids}
            bm25_hits.append(all(i in covered for i in ids))
            spread.append(not any(all(i in c.sentence_ids for i in ids) for c in article.chunks))
    second = read(folder, "second_pass.jsonl")
    resolutions = {r["id"]: r for r in read(folder, "resolutions.jsonl")}
    first = {e["id"]: resolutions.get(e["id"], {}).get("first_pass", e["relation"]) for e in examples}
    agreement = {}
    if second:
        from sklearn.metrics import cohen_kappa_score

        for pass_name in sorted({r["pass"] for r in second}):
            rows = [r for r in second if r["pass"] == pass_name]
            a, b = [first[r["id"]] for r in rows], [r["relation"] for r in rows]
            agreement[pass_name] = {"examples": len(rows), "agreement": float(np.mean([x == y for x, y in zip(a, b)])),
                                    "kappa": float(cohen_kappa_score(a, b)),
                                    "disagreements": [(r["id"], x, y) for r, x, y in zip(rows, a, b) if x != y]}
    return {
        "dataset": name, "articles": len(articles), "examples": len(examples),
        "per_relation": dict(sorted(Counter(e["relation"] for e in examples).items())),
        "words_per_article": [min(words), round(float(np.mean(words))), max(words)],
        "paragraphs_per_article": [min(paragraphs), max(paragraphs)],
        "chunks_per_article": [min(chunks_per_article), round(float(np.mean(chunks_per_article)), 1),
                               max(chunks_per_article)],
        "k4_coverage": float(np.mean([min(K, n) / n for n in chunks_per_article])),
        "evidence_spread_over_chunks": float(np.mean(spread)),
        "random4_all_evidence": float(np.mean(random_rates)),
        "bm25_top4_all_evidence": float(np.mean(bm25_hits)),
        "question_only_baseline": question_only_baseline(examples),
        "second_pass": agreement,
        "shared_names": shared_names(articles),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="deeplogic-v2")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = card(args.name)
    for key, value in figures.items():
        print(f"{key:30s} {value if not isinstance(value, float) else f'{value:.3f}'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
