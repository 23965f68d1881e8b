"""How well a relation classifier names relations: accuracy, macro-F1, per-relation precision/recall, confusion."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

# The paper's RAG-QA-1300 test accuracies (Hu, Zhou & Wang 2024), shown beside ours.
PAPER_FINETUNED_GPT4O_ACCURACY = 0.7577
PAPER_BASE_GPT4O_ACCURACY = 0.4923


def classification_scores(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]
                          ) -> tuple[dict[str, float], pd.DataFrame, np.ndarray]:
    """Headline metrics, a per-relation table and the confusion matrix (rows gold, columns predicted).

    Predictions outside ``labels`` (``unknown``) count as wrong and get their own confusion column.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    if len(gold) != len(predicted) or not gold:
        raise ValueError(f"need equally many gold and predicted labels (> 0), got {len(gold)} and {len(predicted)}")
    columns = list(labels) + sorted(set(predicted) - set(labels))
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, labels=list(labels),
                                                                     zero_division=0)
    table = pd.DataFrame({"relation": list(labels), "precision": precision, "recall": recall, "f1": f1,
                          "support": support})
    metrics = {
        "accuracy": float(accuracy_score(gold, predicted)),
        "macro_f1": float(f1_score(gold, predicted, labels=list(labels), average="macro", zero_division=0)),
        "unknown_predictions": float(sum(p not in set(labels) for p in predicted)),
        "chance_accuracy": 1.0 / len(labels),
        "paper_finetuned_gpt4o_accuracy": PAPER_FINETUNED_GPT4O_ACCURACY,
        "paper_base_gpt4o_accuracy": PAPER_BASE_GPT4O_ACCURACY,
    }
    matrix = confusion_matrix(gold, predicted, labels=columns)[: len(labels)]
    return metrics, table, matrix


def confusion_figure(matrix: np.ndarray, labels: Sequence[str], predicted_labels: Sequence[str], title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 8))
    axes.imshow(matrix, cmap="Blues")
    axes.set_xticks(range(len(predicted_labels)), predicted_labels, rotation=60, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    for (row, column), value in np.ndenumerate(matrix):
        if value:
            axes.text(column, row, str(value), ha="center", va="center", fontsize=8)
    axes.set_xlabel("predicted relation")
    axes.set_ylabel("gold relation")
    axes.set_title(title)
    figure.tight_layout()
    return figure
