"""Benchmark 1: the paper grid through OPI vs the loop a LangChain user writes by hand, same retrieved chunks.

    python benchmarks/naive_vs_opi.py [--dataset deeplogic-130] [--examples N ...] [--configurations dps,knn,...]

Each ``--examples`` size (default: all, then the first 10) is one side-by-side run: OPI then the naive loop.

OPI: ``opi-eval experiment=paper_grid`` (cold cache, in a temporary folder, with its classifier and report, i.e.
more work than the naive loop does). Naive: for each configuration and each example, split the article, build the
LangChain retriever(s) from scratch (KNNRetriever, BM25Retriever, TFIDFRetriever, SVMRetriever, an
InMemoryVectorStore for MMR, EnsembleRetriever for A- combinations; numpy for DPS and EDI, which LangChain lacks),
embed, retrieve, map chunks to complete sentences (pySBD), read (top-2 sentences by similarity), score (cosine of
answer and ground truth). The model is loaded once, as any user would; nothing else is shared.
Asserts that both retrieve the same chunks for every (configuration, example).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from flows.cli.start import start_command  # noqa: E402  (quiet, offline environment)

SETUPS = ["dps", "knn", "bm25", "svm", "tfidf", "mmr", "edi", "a_seven", "a_four", "a_two", "s_seven", "s_four",
          "s_two"]
NAMES = {"dps": "DPS", "knn": "kNN", "bm25": "BM25", "svm": "SVM", "tfidf": "TF-IDF", "mmr": "MMR", "edi": "EDI",
         "a_seven": "A-Seven", "a_four": "A-Four", "a_two": "A-Two", "s_seven": "S-Seven", "s_four": "S-Four",
         "s_two": "S-Two"}
SETS = {"seven": ["knn", "dps", "bm25", "svm", "tfidf", "mmr", "edi"], "four": ["knn", "dps", "tfidf", "mmr"],
        "two": ["knn", "dps"]}


def members(setup: str) -> tuple[str, list[str]]:
    if setup[:2] in ("a_", "s_"):
        return setup[0], SETS[setup[2:]]
    return "single", [setup]


def run_opi(folder: Path, setups: list[str], dataset: str, limit: int | None) -> float:
    command = [sys.executable, "-m", "flows.cli.evaluate", "-m", f"setup={','.join(setups)}", f"dataset={dataset}",
               f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
               f"paths.cache_dir={folder}/cache", f"hydra.sweep.dir={folder}/multirun"]
    if limit:
        command.append(f"dataset.limit={limit}")
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=folder, stdout=subprocess.DEVNULL, env={**os.environ,
                   "PREFECT_HOME": str(folder / "prefect")})
    return time.perf_counter() - started


def opi_chunks(folder: Path, examples) -> dict[tuple[str, str], list[str]]:
    """(configuration, example id) -> retrieved chunk texts, from the sweep's predictions in MLflow."""
    import mlflow

    from flows.tracking.sweeps import child_predictions, find_sweep
    from opi.chunking import document_id
    from opi.articles import prepare_articles
    from opi.schemas import ChunkingConfig

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    articles = prepare_articles([e.context for e in examples], ChunkingConfig().size, ChunkingConfig().overlap)
    context = {e.id: e.context for e in examples}
    found = {}
    for name, (run, rows) in child_predictions(client, find_sweep(client, "opi", None)).items():
        setup = run.data.tags["opi.setup"]
        for example_id, chunk_ids in zip(rows["id"], rows["chunk_ids"]):
            chunks = articles[document_id(context[example_id])].chunks
            found[(setup, example_id)] = [chunks[i].text for i in chunk_ids]
    return found


class PlainEmbeddings:
    """LangChain's Embeddings interface on a sentence-transformers model, no cache (what a user writes)."""

    def __init__(self, model):
        self.model = model
        self.texts = 0

    def embed_documents(self, texts):
        self.texts += len(texts)
        return self.model.encode(list(texts), normalize_embeddings=False).tolist()

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def naive_grid(examples, setups: list[str], size: int = 100, overlap: int = 20):
    import pysbd
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever, KNNRetriever, SVMRetriever, TFIDFRetriever
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.metrics.pairwise import euclidean_distances

    from opi.embeddings import PACKAGED_MINILM, resolve_model_path

    model = SentenceTransformer(resolve_model_path(PACKAGED_MINILM), device="cpu")
    model = SentenceTransformer(modules=[m for m in model if not isinstance(m, Normalize)], device="cpu")
    plain = PlainEmbeddings(model)
    embeddings = type("E", (Embeddings,), {"embed_documents": lambda self, t: plain.embed_documents(t),
                                           "embed_query": lambda self, t: plain.embed_query(t)})()
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap,
                                              separators=["\n\n", "\n", r"(?<=[.?!])\s+", " "],
                                              is_separator_regex=True, length_function=lambda t: len(t.split()))
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)

    def retrieve(name: str, question: str, chunks: list[str]) -> list[str]:
        if name == "knn":
            return [d.page_content for d in KNNRetriever.from_texts(chunks, embeddings, k=4).invoke(question)]
        if name == "svm":
            return [d.page_content for d in SVMRetriever.from_texts(chunks, embeddings, k=4).invoke(question)]
        if name == "bm25":
            return [d.page_content for d in BM25Retriever.from_texts(chunks, k=4).invoke(question)]
        if name == "tfidf":
            return [d.page_content for d in TFIDFRetriever.from_texts(chunks, k=4).invoke(question)]
        if name == "mmr":
            store = InMemoryVectorStore.from_texts(chunks, embeddings)
            return [d.page_content for d in store.max_marginal_relevance_search(question, k=4, fetch_k=20,
                                                                              lambda_mult=0.5)]
        if name == "dps":
            scores = np.array(embeddings.embed_documents(chunks)) @ np.array(embeddings.embed_query(question))
            return [chunks[i] for i in np.argsort(-scores, kind="stable")[:4]]
        if name == "edi":
            vectorizer = CountVectorizer().fit(chunks)
            distances = euclidean_distances(vectorizer.transform([question]), vectorizer.transform(chunks))[0]
            return [chunks[i] for i in np.argsort(distances, kind="stable")[:4]]
        raise ValueError(name)

    found, similarities = {}, {}
    for setup in setups:
        mode, names = members(setup)
        scores = []
        for example in examples:
            chunks = splitter.split_text(example.context)
            lists = [retrieve(name, example.question, chunks) for name in names]
            if mode == "a":
                as_retrievers = [_Fixed(texts) for texts in lists]
                ensemble = EnsembleRetriever(retrievers=as_retrievers, weights=[1.0] * len(lists), c=60)
                chosen = [d.page_content for d in ensemble.invoke(example.question)][:4]
                groups = [chosen]
            else:
                chosen = list(dict.fromkeys(t for texts in lists for t in texts))
                groups = lists if mode == "s" else [chosen]
            found[(NAMES[setup], example.id)] = chosen
            spans = segmenter.segment(example.context)
            picked = set()
            for texts in groups:
                for text in texts:
                    start = example.context.find(text)
                    end = start + len(text)
                    picked |= {i for i, s in enumerate(spans) if s.start < end and s.end > start}
            sentences = [spans[i].sent.strip() for i in sorted(picked)]
            vectors = model.encode([example.question] + sentences, normalize_embeddings=True)
            plain.texts += 1 + len(sentences)
            top = sorted(np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")[:2])
            answer = " ".join(sentences[i] for i in top)
            pair = model.encode([answer, example.answer], normalize_embeddings=True)
            plain.texts += 2
            scores.append(float(pair[0] @ pair[1]))
        similarities[NAMES[setup]] = float(np.mean(scores))
    return found, similarities, plain.texts


class _Fixed:
    """A member's already retrieved list, as a LangChain retriever for EnsembleRetriever."""

    def __new__(cls, texts):
        from langchain_core.documents import Document
        from langchain_core.retrievers import BaseRetriever

        class Fixed(BaseRetriever):
            def _get_relevant_documents(self, query, *, run_manager=None):
                return [Document(page_content=t) for t in texts]

        return Fixed()


def side_by_side(dataset: str, setups: list[str], limit: int | None) -> None:
    from opi.data import load_examples
    from opi.schemas import DatasetConfig

    examples, _ = load_examples(DatasetConfig(kind="bundled", name=dataset, limit=limit))
    with tempfile.TemporaryDirectory() as folder:
        opi_seconds = run_opi(Path(folder), setups, dataset, limit)
        ours = opi_chunks(Path(folder), examples)
    started = time.perf_counter()
    theirs, similarities, texts = naive_grid(examples, setups)
    naive_seconds = time.perf_counter() - started
    different = [key for key in theirs if theirs[key] != ours.get(key)]
    print(f"\n{len(setups)} configurations x {len(examples)} examples of {dataset}")
    print(f"{'':<28}{'seconds':>9}")
    print(f"{'OPI (opi-eval, cold cache)':<28}{opi_seconds:>9.1f}")
    print(f"{'naive LangChain loop':<28}{naive_seconds:>9.1f}   ({texts} texts embedded)")
    print(f"ratio naive / OPI: {naive_seconds / opi_seconds:.1f}x")
    print(f"identical retrieved chunks: {len(theirs) - len(different)} of {len(theirs)}", flush=True)
    for key in different[:5]:
        print("  differs:", key, "\n    naive:", [t[:40] for t in theirs[key]], "\n    opi:  ",
              [t[:40] for t in ours.get(key, [])])
    assert not different, f"{len(different)} (configuration, example) pairs retrieved different chunks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="deeplogic-130", help="a bundled set (deeplogic-130 or deeplogic-v2)")
    parser.add_argument("--examples", type=int, nargs="*", default=[0, 10],
                        help="first N examples, one run per size (0: all; default: all, then 10)")
    parser.add_argument("--configurations", default=",".join(SETUPS))
    args = parser.parse_args()
    for limit in args.examples:
        side_by_side(args.dataset, args.configurations.split(","), limit or None)


if __name__ == "__main__":
    start_command()
    main()
