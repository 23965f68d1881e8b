"""SVM retriever, LangChain's recipe (Karpathy's): per question, a linear SVM separates the question's embedding
(the only positive) from the chunks' embeddings, and chunks are ranked by the decision function. Like LangChain's
``SVMRetriever`` (whose index is ``embed_documents`` as returned), on raw, unnormalised vectors: a benchmark
checks that both retrieve the same chunks.

Exact, that is one fit over every chunk for each question: affordable within articles, hours over a corpus of tens
of thousands of chunks. ``candidates=M`` fits over the question's M most similar chunks by cosine plus M chunks drawn
at random from the rest, weighted to stand for all of the rest (the exact fit's objective, sampled), and ranks the M
candidates (an approximation, named in the run's name and params; ``benchmarks/corpus_scale.py`` measures its top-k
agreement with exact). An exact ranking estimated to take longer than ``max_hours`` stops before it starts, saying
so in one line. A fit runs in a thread of its own (liblinear does not return to Python until it is done), so a
process told to stop (SIGTERM, Ctrl-C) stops within a second, abandoning the fit.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from opi.interrupt import abandon, exiting
from opi.retrievers.base import Ranking, Retriever, RetrievalTooSlow
from opi.retrievers.topk import DistinctTexts, RankingInterrupted, stop_if_exiting
from opi.checks import require_number

# one exact fit's cost per chunk, measured on 2 busy cores with 384-d vectors (4.3 s a question over 51,792 chunks)
SECONDS_PER_CHUNK_FIT = 8.3e-5
CORPUS_CHUNKS = 1000  # fits over an index this large are worth a line in the log before they start
log = logging.getLogger("opi")


def exact_hours(questions: int, chunks: int, dimension: int) -> float:
    return questions * (chunks + 1) * SECONDS_PER_CHUNK_FIT * dimension / 384 / 3600


@dataclass
class SVMRetriever(Retriever):
    name: str = "SVM"
    C: float = 0.1
    max_iter: int = 10000
    tol: float = 1e-6
    random_state: int = 0
    candidates: Optional[int] = None  # fit over the M nearest chunks (+ M weighted at random; approximate); None: exact
    max_hours: float = 1.0  # an exact ranking estimated longer stops before it starts

    def __post_init__(self):
        super().__post_init__()
        require_number("C", self.C, gt=0)
        require_number("tol", self.tol, gt=0)
        require_number("max_hours", self.max_hours, gt=0)
        if self.candidates is not None and self.candidates < self.k:
            raise ValueError(f"candidates ({self.candidates}) must be >= k ({self.k})")

    @property
    def label(self) -> str:
        return self.name if self.candidates is None else f"{self.name} ({self.candidates:,} candidates)"

    def rank(self, questions, chunks, depth):
        embedder = self._require_embedder()
        q = embedder.encode(questions, normalize=False)
        if self.candidates is None and len(q):  # before the chunks are embedded
            self._check_affordable(len(questions), len(chunks), q.shape[1])
        distinct = DistinctTexts.of([c.text for c in chunks])
        d = embedder.encode(distinct.texts, normalize=False)
        if self.candidates is not None:
            return self._rank_candidates(q, d, distinct, depth)
        if len(chunks) >= CORPUS_CHUNKS:
            log.info("SVM: one fit over %s chunks for each of %s questions (exact), about %.1f h", f"{len(chunks):,}",
                     f"{len(questions):,}", exact_hours(len(questions), len(chunks), d.shape[1]))
        rankings = []
        for query in q:
            stop_if_exiting()
            # fitted on every chunk, repeated texts as often as they occur (as LangChain's index holds them)
            scores = self._fit(query, d[distinct.inverse]).decision_function(d)[distinct.inverse]
            rankings.append(Ranking.from_scores(scores, depth))
        return rankings

    def _rank_candidates(self, q, d, distinct: DistinctTexts, depth: int) -> list[Ranking]:
        from opi.embeddings.base import unit
        from opi.retrievers.topk import block_length, top_k

        qu, du = unit(q), unit(d)
        rows, values = top_k(lambda start, stop: qu @ du[start:stop].T, len(qu), len(du), self.candidates,
                             block_length(len(qu), 4))
        chunks = len(distinct.inverse)
        rankings = []
        for number, (query, pool) in enumerate(zip(q, distinct.rankings(rows, values, self.candidates))):
            stop_if_exiting()
            nearest = np.array(pool.chunk_ids, dtype=np.int64)
            background = self._background(nearest, chunks, number)
            model = self._fit(query, d[distinct.inverse[np.concatenate([nearest, background])]],
                              weights=(len(nearest), (chunks - len(nearest)) / max(1, len(background))),
                              chunks=chunks)
            scores = model.decision_function(d[distinct.inverse[nearest]])
            order = np.argsort(-scores, kind="stable")[:depth]
            rankings.append(Ranking(tuple(int(nearest[i]) for i in order), tuple(float(scores[i]) for i in order)))
        return rankings

    def _background(self, nearest: np.ndarray, chunks: int, number: int) -> np.ndarray:
        """As many chunks as ``candidates`` (or all there are), drawn at random from those not among the nearest:
        in the fit they stand for every chunk left out, so the hyperplane leans as the exact one does."""
        rest = np.setdiff1d(np.arange(chunks), nearest)
        rng = np.random.default_rng([self.random_state, number])
        return np.sort(rng.choice(rest, min(len(rest), self.candidates), replace=False))

    def _check_affordable(self, questions: int, chunks: int, dimension: int) -> None:
        hours = exact_hours(questions, chunks, dimension)
        if hours > self.max_hours:
            took = (f"{hours:.1f} h" if hours >= 0.1 else f"{hours * 60:.0f} min" if hours >= 1 / 60 else
                    f"{hours * 3600:.0f} s")
            pool = max(self.k, min(1000, chunks // 10))
            raise RetrievalTooSlow(
                f"exact SVM over {chunks:,} chunks for {questions:,} questions would take about {took} (one fit over "
                f"every chunk per question): set candidates={pool} on it (retriever.candidates={pool}, or "
                f"retrievers.svm.candidates={pool} in a combination) to fit over each question's {pool:,} nearest "
                f"chunks (approximate), or max_hours={max(1, int(np.ceil(hours)))} to run it exactly")

    def _fit(self, query: np.ndarray, vectors: np.ndarray, weights: tuple[int, float] | None = None,
             chunks: int | None = None):
        """A linear SVM separating ``query`` from ``vectors``. ``weights`` (candidate mode): the first ``n`` vectors
        count once, the rest ``w`` times each, and the classes are weighted as over all ``chunks``."""
        from sklearn.svm import LinearSVC

        x = np.vstack([query[None, :], vectors])
        y = np.zeros(len(x))
        y[0] = 1
        if weights is None:
            model = LinearSVC(class_weight="balanced", C=self.C, max_iter=self.max_iter, tol=self.tol,
                              random_state=self.random_state)
            return fit_interruptibly(model, x, y)
        nearest, weight = weights
        sample_weight = np.ones(len(x))
        sample_weight[1 + nearest:] = weight
        balanced = {1: (chunks + 1) / 2, 0: (chunks + 1) / (2 * chunks)}  # "balanced" over the whole index
        model = LinearSVC(class_weight=balanced, C=self.C, max_iter=self.max_iter, tol=self.tol,
                          random_state=self.random_state)
        return fit_interruptibly(model, x, y, sample_weight)


def fit_interruptibly(model, x, y, sample_weight=None):
    """``model.fit(x, y)`` in a daemon thread, waited for in slices: a process on its way out stops waiting."""
    failure: list[BaseException] = []
    done = threading.Event()  # not Thread.is_alive(): a signal raised in join() marks a running thread stopped

    def fit():
        try:
            model.fit(x, y, sample_weight=sample_weight)
        except BaseException as err:  # handed to the waiting thread
            failure.append(err)
        finally:
            done.set()

    threading.Thread(target=fit, name="svm-fit", daemon=True).start()
    try:
        while not done.wait(0.2):
            if exiting():
                raise RankingInterrupted("stopped: the process is exiting (an SVM fit was abandoned)")
    finally:  # also when the signal's exception is raised here, in the wait
        if not done.is_set():
            abandon(done)
    if failure:
        raise failure[0]
    return model
