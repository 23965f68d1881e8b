"""An approximate nearest-neighbour index (faiss) for corpora beyond exact search: ``retriever.index=faiss``.

An inverted-file index over inner products (cosine for kNN and MMR's unit vectors, the raw dot product for DPS):
k-means cells (sqrt(N) of them, trained on a sample), each query compared with the vectors of its
``NPROBE`` nearest cells only. Recall@k against exact search is measured by ``benchmarks/corpus_scale.py``. Ties and near-ties may come in another order than exact
search's; small indexes (at most ``EXACT_BELOW`` vectors) are searched exhaustively by faiss, which is exact up to
float rounding.
"""
from __future__ import annotations

import numpy as np

EXACT_BELOW = 10_000  # up to this many vectors a flat (exhaustive) index is as fast
NPROBE = 32  # cells searched per query: the recall / speed dial
TRAINING_PER_CELL = 40  # k-means sample: vectors per cell
SEED = 0


def faiss_module():
    try:
        import faiss
    except ImportError:  # an optional extra
        raise ImportError("retriever.index=faiss needs faiss-cpu: pip install -e '.[ann]'") from None
    return faiss


def search(queries: np.ndarray, vectors: np.ndarray, depth: int, metric: str = "inner_product"
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``depth`` best rows of ``vectors`` by inner product: (rows, scores), best first."""
    if metric != "inner_product":
        raise ValueError(f"unknown metric {metric!r}")
    faiss = faiss_module()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    depth = min(depth, len(vectors))
    if depth == 0 or len(queries) == 0:
        return np.zeros((len(queries), 0), dtype=np.int64), np.zeros((len(queries), 0), dtype=np.float32)
    if len(vectors) <= EXACT_BELOW:
        index = faiss.IndexFlatIP(vectors.shape[1])
    else:
        cells = int(np.sqrt(len(vectors)))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(vectors.shape[1]), vectors.shape[1], cells,
                                   faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(SEED).choice(len(vectors), min(len(vectors), cells * TRAINING_PER_CELL),
                                                    replace=False)
        index.train(vectors[np.sort(sample)])
        index.nprobe = NPROBE
    index.add(vectors)
    scores, rows = index.search(queries, depth)
    return rows, scores  # -1 pads a row when the cells searched held fewer than depth vectors
