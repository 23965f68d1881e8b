"""flows.human.annotate: people's 0-3-7 scores against the metrics, on hand-made answers."""
import pandas as pd

from flows.human.annotate import meta_evaluation, summary


def test_the_tables_are_said_with_the_judge_s_nullable_scores():
    # a metrics=full sweep's predictions hold the judge's and correctness scores as nullable floats (Float64), a
    # missing one where the judge's reply could not be read: pandas called "%.3f" on them and the import crashed
    answers = pd.DataFrame({"example_id": ["a", "b", "a", "b"], "configuration": ["kNN", "kNN", "BM25", "BM25"],
                            "similarity": [0.9, 0.5, 0.4, 0.2],
                            "correctness": pd.array([0.8, None, 0.3, 0.1], dtype="Float64"),
                            "judge_score": pd.array([7, 3, None, 0], dtype="Float64")})
    human = pd.DataFrame({"example_id": ["a", "b", "a", "b"], "configuration": ["kNN", "kNN", "BM25", "BM25"],
                          "score": [7, 3, 3, 0]})
    tables = meta_evaluation(answers, human, (0.3, 0.7))
    by_configuration = tables["by_configuration"].set_index("configuration")
    assert by_configuration.loc["kNN", "human"] == 5.0 and by_configuration.loc["BM25", "judge"] == 0.0
    said = summary(tables)
    assert "by configuration:" in said and "kNN" in said and "5.000" in said and "0.800" in said
