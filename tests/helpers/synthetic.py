"""Synthetic per-example prediction rows with a known distribution, for the statistics and report tests."""
import numpy as np
import pandas as pd


def prediction_rows(n_per_relation: int, similarity: float, accuracy: float, seed: int,
                    relations=("direct_matching", "deductive", "fuzzy"), spread: float = 0.15) -> pd.DataFrame:
    """similarity ~ N(similarity, spread) clipped to [0, 1]; the relation is predicted right with probability
    ``accuracy``; retrieval diagnostics are uniform noise."""
    rng = np.random.default_rng(seed)
    relation = np.repeat(list(relations), n_per_relation)
    correct = rng.random(len(relation)) < accuracy
    return pd.DataFrame({
        "id": [f"e{i}" for i in range(len(relation))], "relation": relation,
        "predicted_relation": np.where(correct, relation, "adversarial"),
        "similarity": np.clip(rng.normal(similarity, spread, len(relation)), 0, 1),
        "retrieved_sentences": rng.integers(5, 15, len(relation)),
        "retrieved_words": rng.integers(100, 300, len(relation)), "support_recall": rng.random(len(relation))})
