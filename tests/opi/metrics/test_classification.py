"""opi.metrics.classification: accuracy, macro-F1, per-relation precision and recall, and the confusion matrix of a
relation classifier, by hand."""
import pytest

from opi.metrics.classification import (PAPER_BASE_GPT4O_ACCURACY, PAPER_FINETUNED_GPT4O_ACCURACY,
                                        classification_scores, confusion_figure)

GOLD = ["a", "a", "b", "b", "c"]
PREDICTED = ["a", "b", "b", "unknown", "b"]


def test_classification_scores_by_hand():
    metrics, table, matrix = classification_scores(GOLD, PREDICTED, ["a", "b", "c"])
    assert metrics["accuracy"] == pytest.approx(2 / 5)
    # a: precision 1/1, recall 1/2, F1 2/3; b: predicted 3 times, right once: P 1/3, R 1/2, F1 0.4; c: 0
    assert table.set_index("relation")[["precision", "recall", "f1", "support"]].to_dict("index") == {
        "a": {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2},
        "b": {"precision": pytest.approx(1 / 3), "recall": 0.5, "f1": pytest.approx(0.4), "support": 2},
        "c": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}}
    assert metrics["macro_f1"] == pytest.approx((2 / 3 + 0.4 + 0) / 3)
    assert metrics["unknown_predictions"] == 1 and metrics["chance_accuracy"] == pytest.approx(1 / 3)
    assert (metrics["paper_finetuned_gpt4o_accuracy"], metrics["paper_base_gpt4o_accuracy"]) == (
        PAPER_FINETUNED_GPT4O_ACCURACY, PAPER_BASE_GPT4O_ACCURACY) == (0.7577, 0.4923)
    # rows gold a, b, c; columns predicted a, b, c, then unknown (outside the label set)
    assert matrix.tolist() == [[1, 1, 0, 0], [0, 1, 0, 1], [0, 1, 0, 0]]


@pytest.mark.parametrize("gold, predicted", [([], []), (["a"], ["a", "b"])])
def test_classification_scores_need_as_many_predictions_as_gold_labels(gold, predicted):
    with pytest.raises(ValueError, match="need equally many gold and predicted labels"):
        classification_scores(gold, predicted, ["a", "b"])


def test_the_confusion_figure_writes_each_nonzero_count():
    _, _, matrix = classification_scores(GOLD, PREDICTED, ["a", "b", "c"])
    figure = confusion_figure(matrix, ["a", "b", "c"], ["a", "b", "c", "unknown"], "local-clf")
    axes = figure.axes[0]
    assert sorted(t.get_text() for t in axes.texts) == ["1"] * 5  # five nonzero cells, each 1
    assert [t.get_text() for t in axes.get_xticklabels()] == ["a", "b", "c", "unknown"]
    assert axes.get_title() == "local-clf"
