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
ARTICLES = prepare_articles([MILL, QUAY], size=6, overlap=0)  # one chunk per sentence: MILL 0-2, QUAY 0-1


def rows(**kwargs):
    return prediction_rows(EXAMPLES, RETRIEVED, TEXTS, ["In 1901.", None], ["temporal", None], [0.9, float("nan")],
                           ARTICLES, **kwargs)


def test_one_row_per_example_with_what_was_retrieved_answered_and_classified():
    table = rows()
    assert table["id"].tolist() == ["m1", "q1"]
    assert table["chunk_ids"].tolist() == [[1, 2], []] and table["sentence_ids"].tolist() == [[1, 2], []]
    assert table["retrieved_sentences"].tolist() == [2, 0]
    assert table["retrieved_words"].tolist() == [4 + 4, 0]  # "It closed in 1901." + "The river silted up."
    # no answer (an LLM's empty reply) stays missing, and so does its relation
    assert table["generated_answer"].iloc[0] == "In 1901." and pd.isna(table["generated_answer"].iloc[1])
    assert table["predicted_relation"].iloc[0] == "temporal" and pd.isna(table["predicted_relation"].iloc[1])
    assert table["relation"].iloc[0] == "temporal" and pd.isna(table["relation"].iloc[1])  # no gold relation
    assert table["similarity"].iloc[0] == 0.9 and pd.isna(table["similarity"].iloc[1])
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
    view = corpus_view(ARTICLES)  # MILL chunks 0-2, QUAY's 3-4
    retrieved = {"m1": Retrieved((1, 3), (1, 3)), "q1": Retrieved((3, 4), (3, 4))}
    table = prediction_rows(EXAMPLES, retrieved, TEXTS, ["a", "b"], ["temporal", "fuzzy"], [0.5, 0.5], view,
                            corpus=True)
    assert table["right_article"].tolist() == [0.5, 1.0]


def test_over_the_corpus_an_answer_in_another_articles_sentence_is_not_found():
    twin = "The quay was rebuilt. It closed in 1901."  # another article holding the same sentence as MILL's answer
    view = corpus_view(prepare_articles([MILL, twin], size=6, overlap=0))  # MILL chunks 0-2, twin's 3-4
    example = [EXAMPLES[0]]
    from_twin = {"m1": Retrieved((4,), (4,))}
    table = prediction_rows(example, from_twin, [["It closed in 1901."]], ["a"], ["temporal"], [0.5], view,
                            corpus=True)
    assert table["answer_found"].tolist() == [0.0] and table["evidence_hit"].tolist() == [0.0]
    assert table["answer_in_chunks"].tolist() == [0.0] and table["right_article"].tolist() == [0.0]
    from_own = {"m1": Retrieved((1,), (1,))}
    table = prediction_rows(example, from_own, [["It closed in 1901."]], ["a"], ["temporal"], [0.5], view,
                            corpus=True)
    assert table["answer_found"].tolist() == [1.0] and table["answer_in_chunks"].tolist() == [1.0]


def test_answer_in_chunks_reads_the_chunks_not_their_widened_sentences():
    article = "It was built in 1850 near the old mill by the river. Later, the town grew."
    (prepared,) = prepare_articles([article], size=5, overlap=0).values()  # chunk 1 is a fragment of sentence 0
    example = Example("e", article, "When?", "built in 1850 near the old mill by the river")
    first = prepared.chunks[0]
    retrieved = {"e": Retrieved((first.idx,), first.sentence_ids)}
    sentences = [[prepared.sentences[i].text for i in first.sentence_ids]]
    table = prediction_rows([example], retrieved, sentences, ["x"], [None], [0.5], {prepared.doc_id: prepared})
    assert first.text == "It was built in 1850" and table["answer_found"].tolist() == [1.0]  # its whole sentence
    assert table["answer_in_chunks"].tolist() == [0.0]  # the chunk itself ends at "1850"


def test_with_scores_adds_columns_and_keeps_a_missing_score_missing():
    table = rows()
    scored = with_scores(table, {"correctness": [0.75, None], "judge_score": [7, 3]})
    assert scored["correctness"].iloc[0] == 0.75 and pd.isna(scored["correctness"].iloc[1])
    assert scored["judge_score"].tolist() == [7.0, 3.0] and str(scored["judge_score"].dtype) == "Float64"
    assert "correctness" not in table  # the rows given are left as they were
    with pytest.raises(ValueError):
        with_scores(table, {"correctness": [0.5]})  # one score per row
