"""SVM retriever, LangChain's recipe (Karpathy's): per question, a linear SVM separates the question's embedding
(the only positive) from the chunks' embeddings, and chunks are ranked by the decision function. Like LangChain's
``SVMRetriever`` (whose index is ``embed_documents`` as returned), on raw, unnormalised vectors: a benchmark
checks that both retrieve the same chunks."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opi.retrievers.base import Retriever


@dataclass
class SVMRetriever(Retriever):
    name: str = "SVM"
    C: float = 0.1
    max_iter: int = 10000
    tol: float = 1e-6
    random_state: int = 0

    def __post_init__(self):
        super().__post_init__()
        if self.C <= 0:
            raise ValueError(f"C must be > 0, got {self.C}")

    def score(self, questions, chunks):
        from sklearn.svm import LinearSVC

        embedder = self._require_embedder()
        q = embedder.encode(questions, normalize=False)
        d = embedder.encode([c.text for c in chunks], normalize=False)
        scores = []
        for query in q:
            x = np.vstack([query[None, :], d])
            y = np.zeros(len(x))
            y[0] = 1
            clf = LinearSVC(class_weight="balanced", C=self.C, max_iter=self.max_iter, tol=self.tol,
                            random_state=self.random_state)
            clf.fit(x, y)
            scores.append(clf.decision_function(d))
        return np.array(scores)
