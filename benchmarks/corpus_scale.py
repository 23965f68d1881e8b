"""Corpus scope at scale (issue #28): per retriever, the seconds and peak RSS of ranking every question against one
index of all chunks of all articles, BEFORE (the opi package of commit 9bb65a4) and AFTER (the working tree), side
by side, and how far AFTER's top-4 agrees with BEFORE's.

    python benchmarks/corpus_scale.py --sizes 13k                  # 600 questions x ~13k chunks
    python benchmarks/corpus_scale.py --sizes 52k                  # 2,400 questions x ~52k chunks
    python benchmarks/corpus_scale.py --sizes 1m                   # 2,400 questions x 1,000,000 chunks
    python benchmarks/corpus_scale.py --sizes 13k,52k,1m --json-out corpus-scale.json   # the table, from cache

    options: --retrievers DPS,kNN,MMR,BM25,TF-IDF,EDI,SVM,SVM-cand1000,kNN-faiss  --implementations before,after
             --work DIR (default corpus-scale-work)  --max-seconds 1800  --svm-questions 100
             --include-slow-before [BM25,SVM@52k,...]  --rerun
    smoke test: --sizes tiny,tiny-distractors (60 questions x ~1.3k chunks, then with distractors to 12k)

Sizes. 13k and 52k: `make_synthetic.py --rows 600|2400 --distinct-articles`, chunked as OPI chunks them
(``prepare_articles`` with ``ChunkingConfig()``'s size, overlap and length), the corpus every article's chunks in
order (``corpus_view``, what a run with corpus scope indexes), the questions the rows' questions. These articles
repeat each other's paragraphs, so most chunks have copies elsewhere in the corpus (the distinct-texts count is
printed): copies score alike (up to float rounding), so which copy ranks first is tie-breaking, and agreement is
reported by chunk id and by text. 1m: the 52k questions and chunks plus synthetic distractor chunks up to
1,000,000, each a distinct real chunk text (seeded choice) with ~20% of its words replaced by words drawn from the
corpus's own words (frequency-weighted), so every distractor text is distinct.

Vectors. Every text of the 13k and 52k corpora is embedded once with all-MiniLM-L6-v2 (``PACKAGED_MINILM``), raw
vectors cached in the work folder. Embedding 1M texts on 2 CPU cores would take hours, so at 1m the real texts
keep their real vectors and each distractor's vector is a seeded perturbation of its source chunk's:
``alpha * source + shift + Gaussian noise``, where alpha, shift and the noise's covariance are fitted (least
squares) to the model's own vectors of 512 sampled distractors given their sources (``Perturbation``; the mean
cosines to the source, the model's and the perturbation's, are printed). It matches the model's vectors in first
and second moments only: in a one-off check on the smoke test's 11k distractors, kNN put a distractor in 74% of
top-4 slots with these vectors, 91% with the model's own (42% with isotropic noise at the same cosine), and exact
SVM's top-4 overlapped its 1,000-candidate variant's by 0.36 against 0.45 with the model's. The retrievers read
the vectors through a lookup ``Embedder``; every vector is in that embedder's memory before the timer starts.

Measured. Each (implementation, retriever, size) runs in a fresh process (``PYTHONPATH`` = the implementation's
folder; the worker checks ``opi.__file__``): data and vectors loaded, the modules a retriever imports inside
``rank`` imported, ``retriever.prepare`` (timed apart, shown when it takes >= 1 s), then only
``retriever.rank(questions, chunks, 4)`` timed. Peak RSS is the process's high-water mark while ranking (VmHWM,
reset when the timer starts; not ``ru_maxrss``, which a child starts at its parent's: ``peak_rss_mb``), the data
and vectors it holds included; in brackets, its growth over the RSS at the timer's start. A ranking over the
--max-seconds limit is killed. BEFORE runs that cannot fit in memory or would take hours (BM25 and SVM at 52k and
1m, everything at 1m: its Q x N score matrix is 9.6 GB float32, 19.2 GB float64) are not started without
--include-slow-before (all of them, or those named: a retriever, or retriever@size); their projection is linear
in questions x chunks from the largest smaller size measured. Exact SVM at 52k and 1m ranks only the first
--svm-questions questions (marked "/Nq"); AFTER's exact SVM gets ``max_hours`` = --max-seconds / 3600, so it
refuses by its own estimate ("refused by the retriever") what the limit would kill.

Agreement. Mean over questions of |top-4 AFTER & top-4 BEFORE| / 4 by chunk id, and the share of questions whose
ordered top-4 is identical; "texts" is the same overlap counting copies of one text as equal (shown when it
differs). The approximate variants (SVM-cand1000: the SVM fitted over the 1,000 best chunks by cosine plus 1,000
weighted at random from the rest;
kNN-faiss: an approximate nearest-neighbour index) are compared with AFTER's exact run of their family at the same
size, on the questions both ranked. Variants the working tree does not have yet are "not available".

Everything (data, vectors, rankings as int32 Q x 4 .npy, one JSON per run) is kept in --work and reused: a run is
repeated only when its implementation's opi source changed (or --rerun), so sizes can be run one at a time.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import hashlib
import importlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BEFORE_COMMIT = "9bb65a4"
DEPTH = 4
MAX_CHUNKS_1M = 1_000_000
SUBSTITUTED = 0.2  # share of a distractor's words replaced
CALIBRATION_SAMPLE = 512
SETUP_SECONDS = 900  # a worker's loading of data and vectors is killed after max(this, --max-seconds)
METHOD = 3  # part of a cached run's key: raise it when what the worker measures changes


@dataclasses.dataclass(frozen=True)
class Size:
    name: str
    rows: int  # make_synthetic rows: the questions and their articles
    chunks: int | None = None  # fill the corpus with distractors up to this many chunks (None: real chunks only)
    base: str | None = None  # the size whose questions and chunks this one extends
    svm_subset: bool = False  # exact SVM ranks only the first --svm-questions questions
    slow_before: tuple[str, ...] = ()  # BEFORE runs not started without --include-slow-before ("*": all)
    test: bool = False  # a smoke test of the script, not a measurement


SIZES = {s.name: s for s in (
    Size("tiny", 60, test=True),
    Size("tiny-distractors", 60, 12_000, base="tiny", svm_subset=True, slow_before=("BM25", "SVM"), test=True),
    Size("13k", 600),
    Size("52k", 2400, svm_subset=True, slow_before=("BM25", "SVM")),
    Size("1m", 2400, MAX_CHUNKS_1M, base="52k", svm_subset=True, slow_before=("*",)))}
# label: (class in opi.retrievers, settings, needs the embedder, AFTER's exact run it is compared with)
RETRIEVERS = {
    "DPS": ("DPSRetriever", {}, True, None),
    "kNN": ("KNNRetriever", {}, True, None),
    "MMR": ("MMRRetriever", {}, True, None),
    "BM25": ("BM25Retriever", {}, False, None),
    "TF-IDF": ("TFIDFRetriever", {}, False, None),
    "EDI": ("EDIRetriever", {}, False, None),
    "SVM": ("SVMRetriever", {}, True, None),
    "SVM-cand1000": ("SVMRetriever", {"candidates": 1000}, True, "SVM"),
    "kNN-faiss": ("KNNRetriever", {"index": "faiss"}, True, "kNN"),
}
# modules the retrievers import inside rank(): imported before the timer, so a small size does not time imports
IMPORTS = {"MMR": ["langchain_core.vectorstores.utils"], "BM25": ["rank_bm25"], "SVM": ["sklearn.svm"],
           "SVM-cand1000": ["sklearn.svm"], "kNN-faiss": ["faiss"],
           **{name: ["sklearn.feature_extraction.text", "sklearn.metrics.pairwise"] for name in ("TF-IDF", "EDI")}}
SCORE_BYTES = {"DPS": 4, "kNN": 4, "MMR": 4, "TF-IDF": 8, "EDI": 8, "SVM": 8}  # BEFORE's Q x N score matrix


def slow_before(retriever: str, size: Size) -> bool:
    return "*" in size.slow_before or retriever in size.slow_before


def included(args, retriever: str, size: Size) -> bool:
    """Whether --include-slow-before names this run."""
    named = set(args.include_slow_before.split(","))
    return bool(named & {"*", retriever, f"{retriever}@{size.name}"})


# ---------------------------------------------------------------------------------------------------- the data

def size_dir(work: Path, size: str) -> Path:
    return work / "data" / size


def ensure_data(work: Path, size: Size) -> dict:
    """The size's corpus (corpus.parquet), questions (questions.json), vectors (vectors.npy, one row per distinct
    text in ``vector_texts`` order), text ids per chunk (text_ids.npy) and meta.json; built once."""
    folder = size_dir(work, size.name)
    if (folder / "meta.json").exists():
        return json.loads((folder / "meta.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    if size.base:
        base = ensure_data(work, SIZES[size.base])
        meta = extend_with_distractors(work, size, base)
    else:
        meta = real_corpus(folder, size)
    texts = corpus_texts(folder)
    np.save(folder / "text_ids.npy", text_ids(texts))
    meta.update(chunks=len(texts), distinct_texts=len(set(texts)))
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def real_corpus(folder: Path, size: Size) -> dict:
    from opi.articles import corpus_view, prepare_articles
    from opi.data import load_examples
    from opi.schemas import ChunkingConfig, DatasetConfig

    rows = folder / "rows.parquet"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_synthetic.py"), "--rows", str(size.rows),
                    "--distinct-articles", "--out", str(rows)], check=True)
    print(f"[{size.name}] chunking {size.rows} articles ...", flush=True)
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(rows)))
    chunking = ChunkingConfig()
    articles = prepare_articles([e.context for e in examples], chunking.size, chunking.overlap, chunking.length)
    corpus = next(iter(corpus_view(articles).values()))
    questions = [e.question for e in examples]
    write_corpus(folder, [dataclasses.asdict(c) for c in corpus.chunks])
    (folder / "questions.json").write_text(json.dumps(questions))
    print(f"[{size.name}] embedding the distinct texts ...", flush=True)
    vectors = embedder_model().raw(vector_texts(questions, [c.text for c in corpus.chunks]))
    np.save(folder / "vectors.npy", vectors)
    return {"size": size.name, "questions": len(questions), "articles": len(articles), "synthetic_chunks": 0}


def extend_with_distractors(work: Path, size: Size, base: dict) -> dict:
    import pandas as pd

    source_dir, folder = size_dir(work, size.base), size_dir(work, size.name)
    questions = json.loads((source_dir / "questions.json").read_text())
    frame = pd.read_parquet(source_dir / "corpus.parquet")
    real = frame["text"].tolist()
    order = vector_texts(questions, real)
    row_of = {t: i for i, t in enumerate(order)}
    sources = list(dict.fromkeys(real))  # distinct real chunk texts
    n = size.chunks - len(real)
    print(f"[{size.name}] {n:,} distractor texts ...", flush=True)
    texts, picked = distractor_texts(sources, n, set(order), seed=0)
    vectors = np.load(source_dir / "vectors.npy")
    source_vectors = vectors[[row_of[sources[p]] for p in picked]]
    print(f"[{size.name}] fitting distractor vectors to the model's vectors of {CALIBRATION_SAMPLE} of them ...",
          flush=True)
    perturbation = Perturbation.fitted(texts, [sources[p] for p in picked], source_vectors)
    synthetic = perturbation.apply(source_vectors, seed=1)
    cosine = float(np.mean(np.sum(unit(synthetic[:100_000]) * unit(source_vectors[:100_000]), axis=1)))
    np.save(folder / "vectors.npy", np.concatenate([vectors, synthetic]))
    del vectors, source_vectors, synthetic
    start = len(frame)
    extra = pd.DataFrame({"doc_id": [f"distractor-{i // 20:06d}" for i in range(n)],
                          "idx": np.arange(start, start + n), "text": texts, "start": 0,
                          "end": [len(t) for t in texts], "sentence_ids": [[] for _ in range(n)]})
    write_corpus(folder, pd.concat([frame, extra], ignore_index=True))
    (folder / "questions.json").write_text(json.dumps(questions))
    return {"size": size.name, "questions": len(questions), "articles": base["articles"],
            "synthetic_chunks": n, "substituted": SUBSTITUTED, "synthetic_alpha": perturbation.alpha,
            "synthetic_model_cosine": perturbation.model_cosine, "synthetic_mean_cosine": cosine}


def distractor_texts(sources: list[str], n: int, taken: set[str], seed: int) -> tuple[list[str], list[int]]:
    """``n`` distinct texts, each a source text (seeded choice) with ~SUBSTITUTED of its words replaced by words
    drawn from all the sources' words; also which source each came from."""
    rng = np.random.default_rng(seed)
    words = [s.split() for s in sources]
    vocabulary = [w for ws in words for w in ws]
    texts, picked, seen = [], [], set(taken)
    while len(texts) < n:
        source = int(rng.integers(len(words)))
        new = list(words[source])
        where = np.flatnonzero(rng.random(len(new)) < SUBSTITUTED)
        if len(where) == 0:
            continue
        for position, choice in zip(where, rng.integers(len(vocabulary), size=len(where))):
            new[position] = vocabulary[choice]
        text = " ".join(new)
        if text not in seen:
            seen.add(text)
            texts.append(text)
            picked.append(source)
    return texts, picked


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """A distractor's vector given its source's: ``alpha * source + shift + noise``, noise ~ N(0, covariance),
    fitted (least squares) to the model's own vectors of a sample of distractors."""
    alpha: float
    shift: np.ndarray
    noise: np.ndarray  # the residuals' covariance's Cholesky factor
    model_cosine: float  # the model's mean cosine between a sampled distractor and its source

    @classmethod
    def fitted(cls, texts: list[str], sources: list[str], source_vectors: np.ndarray) -> "Perturbation":
        sample = np.random.default_rng(2).choice(len(texts), min(CALIBRATION_SAMPLE, len(texts)), replace=False)
        model = embedder_model()
        v = model.raw([texts[i] for i in sample]).astype(np.float64)
        u = source_vectors[sample].astype(np.float64)
        assert np.allclose(unit(model.raw([sources[i] for i in sample])), unit(u), atol=1e-4), \
            "the cached vectors are not the model's"
        alpha = float(np.sum((u - u.mean(0)) * (v - v.mean(0))) / np.sum((u - u.mean(0)) ** 2))
        shift = v.mean(0) - alpha * u.mean(0)
        residuals = v - alpha * u - shift
        noise = np.linalg.cholesky(np.cov(residuals.T) + 1e-6 * np.eye(v.shape[1]))
        return cls(alpha, shift, noise, float(np.mean(np.sum(unit(v) * unit(u), axis=1))))

    def apply(self, vectors: np.ndarray, seed: int, block: int = 100_000) -> np.ndarray:
        rng = np.random.default_rng(seed)
        out = np.empty_like(vectors)
        for start in range(0, len(vectors), block):
            u = vectors[start:start + block].astype(np.float64)
            out[start:start + block] = self.alpha * u + self.shift + rng.standard_normal(u.shape) @ self.noise.T
        return out


@functools.lru_cache(maxsize=1)
def embedder_model():
    """all-MiniLM-L6-v2, raw vectors: the one model the data are embedded with (loaded once)."""
    from opi.embeddings import PACKAGED_MINILM, SentenceEmbedder

    return SentenceEmbedder(PACKAGED_MINILM)


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def write_corpus(folder: Path, chunks) -> None:
    import pandas as pd

    frame = chunks if isinstance(chunks, pd.DataFrame) else pd.DataFrame(chunks)
    frame["sentence_ids"] = [list(ids) for ids in frame["sentence_ids"]]
    frame.to_parquet(folder / "corpus.parquet", index=False)


def corpus_texts(folder: Path) -> list[str]:
    import pandas as pd

    return pd.read_parquet(folder / "corpus.parquet", columns=["text"])["text"].tolist()


def vector_texts(questions: list[str], texts: list[str]) -> list[str]:
    """The texts with a vector, in vectors.npy's row order."""
    return list(dict.fromkeys([*questions, *texts]))


def text_ids(texts: list[str]) -> np.ndarray:
    ids: dict[str, int] = {}
    return np.array([ids.setdefault(t, len(ids)) for t in texts], dtype=np.int32)


# ---------------------------------------------------------------------------------------------------- the worker

def worker(args) -> dict:
    """One ranking run in this process, with whichever opi PYTHONPATH resolves."""
    import opi

    if Path(opi.__file__).resolve().parent != Path(args.opi_dir).resolve():
        raise SystemExit(f"opi imported from {opi.__file__}, expected {args.opi_dir}")
    made = build_retriever(args)
    if isinstance(made, dict):
        return {**made, "opi_file": opi.__file__}
    retriever, questions, chunks = made
    started = time.perf_counter()
    retriever.prepare(questions, chunks)
    prepare_seconds = time.perf_counter() - started
    gc.collect()
    reset = reset_peak()
    base = rss_mb()
    Path(args.started).write_text(str(time.time()))
    started = time.perf_counter()
    try:
        rankings = retriever.rank(questions, chunks, DEPTH)
    except Exception as err:  # AFTER's exact SVM refuses a ranking it estimates to take hours
        if type(err).__name__ != "RetrievalTooSlow":
            raise
        return {"status": "refused", "detail": str(err), "opi_file": opi.__file__}
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    ids = np.full((len(questions), DEPTH), -1, dtype=np.int32)
    for row, ranking in zip(ids, rankings):
        top = list(ranking.chunk_ids[:DEPTH])
        row[:len(top)] = top
    np.save(args.out, ids)
    return {"status": "ok", "seconds": seconds, "prepare_seconds": prepare_seconds, "peak_rss_mb": peak,
            "base_rss_mb": base, "peak_reset": reset, "questions": len(questions), "chunks": len(chunks),
            "rankings": len(rankings), "settings": {k: v for k, v in vars(retriever).items() if k != "embedder"
                                                    and isinstance(v, (int, float, str, type(None)))},
            "opi_file": opi.__file__}


def build_retriever(args):
    """(retriever, questions, chunks) with every vector in the embedder's memory, or a record saying why not."""
    import opi.retrievers as retrievers

    class_name, settings, needs_embedder, _ = RETRIEVERS[args.retriever]
    cls = getattr(retrievers, class_name)
    fields = {f.name for f in dataclasses.fields(cls)}
    if any(name not in fields for name in settings):
        return {"status": "not available",
                "detail": f"{class_name} has no field {[n for n in settings if n not in fields]}"}
    if "max_hours" in fields:  # AFTER's SVM refuses exact rankings estimated longer: as long as this run's limit
        settings = {**settings, "max_hours": args.max_seconds / 3600}
    folder = Path(args.data)
    questions = json.loads((folder / "questions.json").read_text())
    chunks = load_chunks(folder)
    embedder = None
    if needs_embedder:
        order = vector_texts(questions, [c.text for c in chunks])
        embedder = lookup_embedder(order, np.load(folder / "vectors.npy"))
        for start in range(0, len(order), 1 << 16):  # in slices: no 1M-row copy on the way
            embedder.raw(order[start:start + (1 << 16)])
    for module in IMPORTS.get(args.retriever, []):
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    retriever = cls(**settings, **({"embedder": embedder} if embedder else {}))
    return retriever, questions[:args.questions] if args.questions else questions, chunks


def load_chunks(folder: Path) -> list:
    import pandas as pd

    from opi.chunking import Chunk

    frame = pd.read_parquet(folder / "corpus.parquet")
    names = [f.name for f in dataclasses.fields(Chunk)]
    columns = {name: frame[name].tolist() for name in names}
    columns["sentence_ids"] = [tuple(int(i) for i in ids) for ids in columns["sentence_ids"]]
    columns["idx"] = [int(i) for i in columns["idx"]]
    return [Chunk(*values) for values in zip(*(columns[name] for name in names))]


def lookup_embedder(texts: list[str], vectors: np.ndarray):
    """An ``Embedder`` (this process's opi) whose vectors are rows of ``vectors``, one per text of ``texts``. A
    slice of consecutive rows is returned as a view, so the embedder's memory holds the vectors once, as a
    model's would."""
    from opi.embeddings.base import Embedder

    rows = {t: i for i, t in enumerate(texts)}
    digest = hashlib.sha256(f"{len(texts)}:{vectors.shape}:{texts[:3]}".encode()).hexdigest()[:16]

    class LookupEmbedder(Embedder):
        @property
        def key(self) -> str:
            return f"corpus-scale-lookup:{digest}:raw"

        @property
        def name(self) -> str:
            return "all-MiniLM-L6-v2 (precomputed; 1m distractors perturbed)"

        @property
        def dimension(self) -> int:
            return vectors.shape[1]

        def compute(self, part: list[str]) -> np.ndarray:
            found = [rows[t] for t in part]  # KeyError: a text the benchmark has no vector for
            if found == list(range(found[0], found[0] + len(found))):
                return vectors[found[0]:found[0] + len(found)]
            return vectors[found]

    return LookupEmbedder(batch_size=1024)


def peak_rss_mb() -> float:
    """This process's peak RSS: /proc's VmHWM where there is one. ``ru_maxrss`` is not used on Linux because a
    process started by fork/vfork + exec inherits its parent's high-water mark at the exec (the parent that loaded
    the model made every worker's ru_maxrss ~1 GB)."""
    return _status("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    return _status("VmRSS:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> bool:
    """Start the peak RSS afresh (Linux >= 4.0), so that setup's transient copies are not counted as ranking's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------------- the runs

def opi_dir(work: Path, implementation: str) -> Path:
    """The opi package an implementation runs: the working tree's, or commit 9bb65a4's (extracted once)."""
    if implementation == "after":
        return ROOT / "opi"
    target = work / "before"
    if not (target / "opi" / "__init__.py").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE_COMMIT, "opi"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "opi"


def source_hash(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def run_paths(work: Path, implementation: str, retriever: str, size: str, questions: int | None):
    stem = f"{implementation}-{retriever}" + (f"-q{questions}" if questions else "")
    suffixes = (".json", ".npy", ".log", ".out", ".started")
    return {suffix: work / "runs" / size / (stem + suffix) for suffix in suffixes}


def question_limit(retriever: str, size: Size, svm_questions: int) -> int | None:
    return svm_questions if retriever == "SVM" and size.svm_subset else None


def run(work: Path, implementation: str, retriever: str, size: Size, args) -> dict:
    """One run's record: from the cache when the implementation's source is unchanged, else a fresh worker."""
    questions = question_limit(retriever, size, args.svm_questions)
    paths = run_paths(work, implementation, retriever, size.name, questions)
    package = opi_dir(work, implementation)
    code = f"{source_hash(package)}:m{METHOD}"
    head = {"implementation": implementation, "retriever": retriever, "size": size.name, "code": code,
            "question_limit": questions, "npy": str(paths[".npy"])}
    if paths[".json"].exists() and not args.rerun:
        cached = json.loads(paths[".json"].read_text())
        limited = cached["status"] in ("killed", "refused")  # valid up to the limit it ran under
        if cached.get("code") == code and cached["status"] != "error" and (
                not limited or cached["max_seconds"] >= args.max_seconds):
            return cached
    paths[".json"].parent.mkdir(parents=True, exist_ok=True)
    print(f"[{size.name}] {implementation} {retriever} ...", end=" ", flush=True)
    record = {**head, **launch(package, retriever, size_dir(work, size.name), questions, paths, args.max_seconds)}
    print(describe_seconds(record), flush=True)
    paths[".json"].write_text(json.dumps(record))
    return record


def launch(package: Path, retriever: str, data: Path, questions: int | None, paths: dict, limit: float) -> dict:
    """The worker in its own session: killed when its ranking passes ``limit`` s (its setup: SETUP_SECONDS)."""
    paths[".started"].unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--retriever", retriever, "--data",
               str(data), "--opi-dir", str(package), "--out", str(paths[".npy"]), "--started",
               str(paths[".started"]), "--max-seconds", str(limit),
               *(["--questions", str(questions)] if questions else [])]
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    with open(paths[".log"], "w") as log, open(paths[".out"], "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=log, env=env, start_new_session=True, cwd=str(data))
        launched, ranking_since = time.time(), None
        while process.poll() is None:
            time.sleep(0.2)
            if ranking_since is None and paths[".started"].exists():
                ranking_since = float(paths[".started"].read_text() or time.time())
            since = ranking_since if ranking_since is not None else launched
            if time.time() - since > (limit if ranking_since is not None else max(limit, SETUP_SECONDS)):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                phase = "ranking" if ranking_since is not None else "setup"
                return {"status": "killed", "max_seconds": limit, "detail": f"{phase} over its limit"}
    output = paths[".out"].read_text()
    if process.returncode != 0:
        tail = paths[".log"].read_text().strip().splitlines()[-1:] or [f"exit {process.returncode}"]
        detail = "killed by signal 9 (out of memory?)" if process.returncode == -9 else tail[0][-200:]
        return {"status": "error", "max_seconds": limit, "detail": detail}
    return {"max_seconds": limit, **json.loads(output.strip().splitlines()[-1])}


def not_run(work: Path, retriever: str, size: Size, args, meta: dict) -> dict:
    """A BEFORE run left out: its projection from the largest smaller size measured."""
    limit = question_limit(retriever, size, args.svm_questions)
    questions = min(limit or meta["questions"], meta["questions"])
    record = {"implementation": "before", "retriever": retriever, "size": size.name, "status": "not run",
              "question_limit": limit, "questions": questions}
    smaller = [name for name in list(SIZES)[:list(SIZES).index(size.name)] if SIZES[name].test == size.test]
    for name in reversed(smaller):
        limit = question_limit(retriever, SIZES[name], args.svm_questions)
        path = run_paths(work, "before", retriever, name, limit)[".json"]
        measured = json.loads(path.read_text()) if path.exists() else {}
        if measured.get("status") == "ok":
            ratio = questions * meta["chunks"] / (measured["questions"] * measured["chunks"])
            record["projected_seconds"] = measured["seconds"] * ratio
            record["projected_from"] = name
            break
    if retriever in SCORE_BYTES:
        record["score_matrix_gb"] = questions * meta["chunks"] * SCORE_BYTES[retriever] / 1e9
    return record


# ---------------------------------------------------------------------------------------------------- agreement

def agreement(a: dict, b: dict, texts: np.ndarray) -> dict | None:
    """Top-4 overlap of run ``a`` with reference run ``b`` on the questions both ranked."""
    if a.get("status") != "ok" or b.get("status") != "ok":
        return None
    x, y = np.load(a["npy"]), np.load(b["npy"])
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    ids, same, by_text = [], [], []
    for p, q in zip(x, y):
        p, q = p[p >= 0], q[q >= 0]
        width = max(len(q), 1)
        ids.append(len(set(p) & set(q)) / width)
        same.append(np.array_equal(p, q))
        by_text.append(sum((Counter(texts[p]) & Counter(texts[q])).values()) / width)
    return {"questions": n, "overlap": float(np.mean(ids)), "identical": float(np.mean(same)),
            "overlap_texts": float(np.mean(by_text)), "reference": f"{b['implementation']} {b['retriever']}"}


# ---------------------------------------------------------------------------------------------------- the table

def describe_seconds(record: dict | None) -> str:
    if record is None:
        return "—"
    status = record["status"]
    if status == "ok":
        text = f"{record['seconds']:.1f} s" + (f"/{record['questions']}q" if record.get("question_limit") else "")
        if record.get("prepare_seconds", 0) >= 1:
            text += f" (+{record['prepare_seconds']:.0f} s prepare)"
        return text
    if status == "killed":
        return f"> {record['max_seconds']:.0f} s (killed{', setup' if 'setup' in record['detail'] else ''})"
    if status == "not run":
        parts = []
        if "projected_seconds" in record:
            q = f"/{record['questions']}q" if record.get("question_limit") else ""
            parts.append(f"~{duration(record['projected_seconds'])}{q}")
        if record.get("score_matrix_gb", 0) >= 1:  # what would not fit, not a small matrix
            parts.append(f"{record['score_matrix_gb']:.1f} GB score matrix")
        return "not run: projected " + (", ".join(parts) or "(no smaller size measured)")
    if status == "refused":
        found = re.search(r"about ([\d.]+ h)", record.get("detail", ""))
        estimate = f"~{found.group(1)}" if found else "its estimate"
        return f"refused by the retriever: {estimate} > the {duration(record['max_seconds'])} limit"
    return f"{status}: {record.get('detail', '')}" if status == "error" else status


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def describe_rss(record: dict | None) -> str:
    if not record or record["status"] != "ok":
        return "—"
    return f"{record['peak_rss_mb'] / 1024:.2f} GB (+{(record['peak_rss_mb'] - record['base_rss_mb']) / 1024:.2f})"


def describe_agreement(result: dict | None, exact_family: bool) -> str:
    if result is None:
        return "—"
    text = f"{result['overlap']:.3f}, {result['identical']:.0%} same order"
    if abs(result["overlap_texts"] - result["overlap"]) > 5e-4:
        text += f"; texts {result['overlap_texts']:.3f}"
    notes = [] if not exact_family else [f"vs exact {result['reference'].split()[1]}"]
    if result.get("partial"):
        notes.append(f"first {result['questions']} q")
    return text + (f" ({', '.join(notes)})" if notes else "")


def table(sizes: list[Size], retrievers: list[str], records: dict, agreements: dict) -> str:
    header = ["retriever"] + [f"{s.name} {c}" for s in sizes
                              for c in ("before s", "after s", "before RSS", "after RSS", "agreement")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for retriever in retrievers:
        cells = [retriever]
        for size in sizes:
            before, after = (records.get((i, retriever, size.name)) for i in ("before", "after"))
            cells += [describe_seconds(before), describe_seconds(after), describe_rss(before), describe_rss(after),
                      describe_agreement(agreements.get((retriever, size.name)),
                                         RETRIEVERS[retriever][3] is not None)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="13k,52k,1m")
    parser.add_argument("--retrievers", default=",".join(RETRIEVERS))
    parser.add_argument("--implementations", default="before,after")
    parser.add_argument("--work", type=Path, default=Path("corpus-scale-work"))
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument("--svm-questions", type=int, default=100)
    parser.add_argument("--include-slow-before", nargs="?", const="*", default="",
                        help="start the slow BEFORE runs: all, or those named (BM25,SVM@52k)")
    parser.add_argument("--rerun", action="store_true", help="run again even when a cached run is current")
    for hidden in ("--retriever", "--data", "--opi-dir", "--out", "--started"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    sizes = [SIZES[s] for s in args.sizes.split(",")]
    retrievers = [r for r in args.retrievers.split(",") if r]
    implementations = args.implementations.split(",")
    unknown = [r for r in retrievers if r not in RETRIEVERS] + [i for i in implementations
                                                                 if i not in ("before", "after")]
    if unknown:
        raise SystemExit(f"unknown: {unknown}; retrievers are {list(RETRIEVERS)}")
    work = args.work.resolve()
    records, agreements, metas = {}, {}, {}
    for size in sizes:
        meta = metas[size.name] = ensure_data(work, size)
        print(corpus_line(meta), flush=True)
        for retriever in retrievers:
            for implementation in implementations:
                if implementation == "before" and RETRIEVERS[retriever][3] is not None:
                    continue  # an AFTER-only variant
                if implementation == "before" and slow_before(retriever, size) and not included(args, retriever, size):
                    record = not_run(work, retriever, size, args, meta)
                else:
                    record = run(work, implementation, retriever, size, args)
                records[(implementation, retriever, size.name)] = record
        texts = np.load(size_dir(work, size.name) / "text_ids.npy")
        for retriever in retrievers:
            reference = RETRIEVERS[retriever][3]
            after = records.get(("after", retriever, size.name))
            base = records.get(("after", reference, size.name) if reference else ("before", retriever, size.name))
            if after is None or base is None:
                continue
            result = agreement(after, base, texts)
            if result:
                result["partial"] = result["questions"] < max(after.get("questions", 0), base.get("questions", 0))
                agreements[(retriever, size.name)] = result
    print()
    packages = {r["implementation"]: r["opi_file"] for r in records.values() if r.get("opi_file")}
    print("- " + "; ".join(f"{i}: opi from {Path(f).parent}" for i, f in sorted(packages.items(), reverse=True)))
    for size in sizes:
        print("- " + corpus_line(metas[size.name]))
    print("- times: retriever.rank only, every vector in the embedder's memory before the timer\n"
          "- RSS: the run's process's peak while ranking (in brackets: its growth over the RSS at the start)\n"
          "- agreement: top-4 overlap by chunk id, share of questions with the identical ordered top-4, overlap by "
          "text where copies of a text make it differ\n")
    print(table(sizes, retrievers, records, agreements))
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "sizes": metas, "runs": list(records.values()),
            "agreement": [{"retriever": r, "size": s, **a} for (r, s), a in agreements.items()]}, indent=1))


def corpus_line(meta: dict) -> str:
    line = (f"{meta['size']}: {meta['questions']:,} questions x {meta['chunks']:,} chunks "
            f"({meta['distinct_texts']:,} distinct texts, from {meta['articles']:,} articles")
    if meta["synthetic_chunks"]:
        line += (f"; {meta['synthetic_chunks']:,} synthetic distractors, their vectors seeded perturbations of "
                 f"their source chunk's real vector: mean cosine to it {meta['synthetic_mean_cosine']:.3f}, the "
                 f"model's {meta['synthetic_model_cosine']:.3f}")
    return line + ")"


if __name__ == "__main__":
    if "--worker" not in sys.argv:
        sys.path.insert(0, str(ROOT))  # the parent builds the data with the working tree's opi
        from flows.cli.start import start_command

        start_command()
    main()
