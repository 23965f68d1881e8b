"""opi.predictions: one configuration's per-example rows, and answer scores added to them."""
import pandas as pd
import pytest

from opi.articles import corpus_view, prepare_articles
from opi.combine import Retrieved
from opi.data import Example
from opi.predictions import prediction_rows, with_scores

MILL = "The mill opened in 1850. It closed in 1901. The river silted up."
QUAY = "Ships docked at the quay. Sailors sang at night."
EXAMPLES = [Example("m1", MILL, "When did the mill close?", "It closed in 1901.", "temporal",
                    evidence=("It closed in 1901.",)),
            Example("q1", QUAY, "Who sang?", "The sailors sang.", None)]
RETRIEVED = {"m1": Retrieved((1, 2), (1, 2)), "q1": Retrieved((), ())}
TEXTS = [["It closed in 1901.", "The river silted up."], []]


def rows(**kwargs):
    return prediction_rows(EXAMPLES, RETRIEVED, TEXTS, ["In 1901.", ""], ["temporal", "unknown"], [0.9, 0.1],
                           **kwargs)


def test_one_row_per_example_with_what_was_retrieved_answered_and_classified():
    table = rows()
    assert table["id"].tolist() == ["m1", "q1"]
    assert table["chunk_ids"].tolist() == [[1, 2], []] and table["sentence_ids"].tolist() == [[1, 2], []]
    assert table["retrieved_sentences"].tolist() == [2, 0]
    assert table["retrieved_words"].tolist() == [4 + 4, 0]  # "It closed in 1901." + "The river silted up."
    assert table["generated_answer"].tolist() == ["In 1901.", ""]
    assert table["predicted_relation"].tolist() == ["temporal", "unknown"]
    assert table["relation"].iloc[0] == "temporal" and pd.isna(table["relation"].iloc[1])  # no gold relation
    assert table["similarity"].tolist() == [0.9, 0.1]
    assert "right_article" not in table  # within each article: nothing to say


def test_the_diagnostics_are_per_row_and_missing_evidence_stays_missing():
    table = rows()
    assert str(table["evidence_hit"].dtype) == "Float64"
    first = table.iloc[0]
    # answer "It closed in 1901.": content words closed, 1901, both retrieved; found verbatim; the evidence too
    assert (first["support_recall"], first["answer_found"], first["evidence_recall"], first["evidence_hit"]) == (
        1.0, 1.0, 1.0, 1.0)
    second = table.iloc[1]
    assert (second["support_recall"], second["answer_found"]) == (0.0, 0.0)  # nothing retrieved
    assert pd.isna(second["evidence_recall"]) and pd.isna(second["evidence_hit"])  # no evidence: not a 0


def test_over_the_corpus_rows_say_how_many_chunks_came_from_the_right_article():
    view = corpus_view(prepare_articles([MILL, QUAY], size=6, overlap=0))  # MILL chunks 0-2, QUAY's 3-4
    retrieved = {"m1": Retrieved((1, 3), (1, 3)), "q1": Retrieved((3, 4), (3, 4))}
    table = prediction_rows(EXAMPLES, retrieved, TEXTS, ["a", "b"], ["temporal", "fuzzy"], [0.5, 0.5], view)
    assert table["right_article"].tolist() == [0.5, 1.0]


def test_with_scores_adds_columns_and_keeps_a_missing_score_missing():
    table = rows()
    scored = with_scores(table, {"correctness": [0.75, None], "judge_score": [7, 3]})
    assert scored["correctness"].iloc[0] == 0.75 and pd.isna(scored["correctness"].iloc[1])
    assert scored["judge_score"].tolist() == [7.0, 3.0] and str(scored["judge_score"].dtype) == "Float64"
    assert "correctness" not in table  # the rows given are left as they were
    with pytest.raises(ValueError):
        with_scores(table, {"correctness": [0.5]})  # one score per row
