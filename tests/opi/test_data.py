import json

import pandas as pd
import pytest

from collections import Counter

from opi.data import DataError, balanced_split, load_examples
from opi.relations import load_relation_set
from opi.schemas import DatasetConfig

LABELS = ["direct_matching", "multi_hop"]
CONTEXT = "The mill opened in 1850. It closed in 1901 after the river silted up."


def rag12000_rows(n=4):
    return [{"context": CONTEXT, "question": f"When did the mill open, question {i}?",
             "answer": "The mill opened in 1850."} for i in range(n)]


def test_rag12000_parquet_with_labels_by_row(tmp_path):
    pd.DataFrame(rag12000_rows()).to_parquet(tmp_path / "test.parquet")
    pd.DataFrame({"row": [1, 2, 3, 4], "relation": LABELS * 2}).to_csv(tmp_path / "labels.csv", index=False)
    examples, report = load_examples(DatasetConfig(kind="rag12000", path=str(tmp_path / "test.parquet"),
                                                   labels_path=str(tmp_path / "labels.csv"), label_join="row"),
                                     label_set=LABELS)
    assert [e.relation for e in examples] == LABELS * 2
    assert [e.id for e in examples] == ["1", "2", "3", "4"]
    assert report.rows_kept == 4


def test_label_file_that_does_not_match(tmp_path):
    pd.DataFrame(rag12000_rows(2)).to_parquet(tmp_path / "d.parquet")
    pd.DataFrame({"row": [1, 2, 9], "relation": LABELS + ["multi_hop"]}).to_csv(tmp_path / "l.csv", index=False)
    with pytest.raises(DataError, match=r"l\.csv: 1 label\(s\) name no example"):
        load_examples(DatasetConfig(kind="rag12000", path=str(tmp_path / "d.parquet"),
                                    labels_path=str(tmp_path / "l.csv"), label_join="row"), label_set=LABELS)


@pytest.mark.parametrize("labels, message", [
    ({"row": [1, 2, 2], "relation": ["multi_hop", "multi_hop", "direct_matching"]},
     r"l\.csv, row 3, field 'row': '2' is labelled twice \(first at row 2\)"),
    ({"row": [1, 2, 2], "relation": ["multi_hop"] * 3}, r"l\.csv, row 3, field 'row': '2' is labelled twice"),
    ({"row": [1, None, 3], "relation": ["multi_hop"] * 3}, r"l\.csv, row 2, field 'row': missing"),
    ({"row": [1, 2, 3], "relation": ["multi_hop", "telepathic", "multi_hop"]},
     r"l\.csv, row 2, field 'relation': unknown label 'telepathic'"),
    ({"row": [1, 2, 3], "relation": ["multi_hop", None, "multi_hop"]},
     r"l\.csv, row 2, field 'relation': missing; label example '2', or leave its row out"),
])
def test_a_label_file_problem_names_the_label_file_its_row_and_field(tmp_path, labels, message):
    pd.DataFrame(rag12000_rows(3)).to_parquet(tmp_path / "d.parquet")
    pd.DataFrame(labels).to_csv(tmp_path / "l.csv", index=False)
    with pytest.raises(DataError, match=message):
        load_examples(DatasetConfig(kind="rag12000", path=str(tmp_path / "d.parquet"),
                                    labels_path=str(tmp_path / "l.csv"), label_join="row"), label_set=LABELS)


def test_a_row_without_an_id_among_rows_with_ids_is_said_as_such(tmp_path):
    rows = [{"id": "a", **rag12000_rows(1)[0]}, rag12000_rows(1)[0], {"id": "2", **rag12000_rows(1)[0]}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(DataError, match=r"d\.jsonl, row 2, field 'id': missing, where other rows have one"):
        load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl")))


def test_the_readme_column_mapping_maps_our_fields_to_the_files_columns(tmp_path):
    from opi.schemas import ColumnsConfig

    assert ColumnsConfig(context="passage", answer="gold").mapping() == {"context": "passage", "answer": "gold"}


def test_squad_paragraphs_join_into_one_context(tmp_path):
    squad = {"data": [{"title": "Mill", "paragraphs": [
        {"context": "The mill opened in 1850.", "qas": [
            {"id": "q1", "question": "When did the mill open?", "relation": "direct_matching",
             "answers": [{"text": "in 1850", "answer_start": 16}]}]},
        {"context": "It closed in 1901.", "qas": [
            {"id": "q2", "question": "When did it close?", "relation": "direct_matching",
             "answers": [{"text": "in 1901", "answer_start": 10}]}]}]}]}
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    examples, _ = load_examples(DatasetConfig(kind="squad", path=str(tmp_path / "squad.json")), label_set=LABELS)
    assert [e.id for e in examples] == ["q1", "q2"]
    assert examples[0].context == "The mill opened in 1850.\n\nIt closed in 1901."
    assert examples[1].evidence == ("It closed in 1901.",)


def test_csv_with_column_mapping(tmp_path):
    pd.DataFrame({"qid": ["a", "b"], "passage": [CONTEXT] * 2, "query": ["Q one?", "Q two?"],
                  "gold": ["A one.", "A two."], "kind": LABELS}).to_csv(tmp_path / "d.csv", index=False)
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.csv"), columns={
        "id": "qid", "context": "passage", "question": "query", "answer": "gold", "relation": "kind"}), label_set=LABELS)
    assert [(e.id, e.question, e.relation) for e in examples] == [("a", "Q one?", LABELS[0]),
                                                                   ("b", "Q two?", LABELS[1])]


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


GOOD = {"id": "x1", "context": CONTEXT, "question": "When?", "answer": "In 1850.", "relation": "multi_hop"}


@pytest.mark.parametrize("bad, message", [
    ({k: v for k, v in GOOD.items() if k != "answer"}, r"d\.jsonl, row 2: missing field\(s\) \['answer'\]"),
    ({**GOOD, "context": "   "}, r"d\.jsonl, row 2, field 'context': empty"),
    ({**GOOD, "answer": ""}, r"d\.jsonl, row 2, field 'answer': empty"),
    ({**GOOD, "relation": "telepathic"}, r"d\.jsonl, row 2, field 'relation': unknown label 'telepathic'"),
    ({**GOOD, "id": "x0"}, r"d\.jsonl, row 2, field 'id': duplicate id 'x0' \(first at row 1\)"),
])
def test_malformed_rows_name_file_row_and_field(tmp_path, bad, message):
    write_jsonl(tmp_path / "d.jsonl", [{**GOOD, "id": "x0"}, bad])
    with pytest.raises(DataError, match=message):
        load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl")), label_set=LABELS)


def test_skip_mode_reports_what_was_dropped(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{**GOOD, "id": "a"}, {**GOOD, "id": "b", "answer": ""},
                                       {**GOOD, "id": "a"}, {**GOOD, "id": "c", "relation": "nope"}])
    examples, report = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl"), on_invalid="skip"),
                                     label_set=LABELS)
    assert [e.id for e in examples] == ["a"]
    assert report.dropped == {"empty answer": 1, "duplicate id": 1, "unknown relation": 1}
    assert "4 rows read, 1 kept" in report.describe()


def test_undecodable_file(tmp_path):
    (tmp_path / "d.jsonl").write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"context": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"d\.jsonl: not valid UTF-8 at byte \d+ \(line 2\)"):
        load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl")), label_set=LABELS)


def test_zero_rows_and_rows_without_labels(tmp_path):
    from opi.data import labelled

    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match="zero rows"):
        load_examples(DatasetConfig(kind="table", path=str(tmp_path / "empty.jsonl")))
    write_jsonl(tmp_path / "d.jsonl", [{k: v for k, v in GOOD.items() if k != "relation"}, GOOD | {"id": "x"}])
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl")), label_set=LABELS)
    assert examples[0].relation is None and examples[1].relation == GOOD["relation"]  # where gold comes from: the run
    assert labelled(examples) == "some" and labelled(examples[:1]) == "none" and labelled(examples[1:]) == "all"


def test_filters_sample_and_limit():
    all_examples, _ = load_examples(DatasetConfig(name="deeplogic-130"))
    fuzzy, _ = load_examples(DatasetConfig(name="deeplogic-130", relations=["fuzzy"]))
    assert len(fuzzy) == 10 and {e.relation for e in fuzzy} == {"fuzzy"}
    a, _ = load_examples(DatasetConfig(name="deeplogic-130", sample=20), seed=1)
    b, _ = load_examples(DatasetConfig(name="deeplogic-130", sample=20), seed=1)
    assert [e.id for e in a] == [e.id for e in b] and len(a) == 20
    limited, _ = load_examples(DatasetConfig(name="deeplogic-130", limit=5))
    assert [e.id for e in limited] == [e.id for e in all_examples[:5]]


def test_balanced_split_is_deterministic_and_balanced():
    examples, _ = load_examples(DatasetConfig(name="deeplogic-130"))
    train, test = balanced_split(examples, per_relation=10, test_fraction=0.2, seed=7)
    again_train, again_test = balanced_split(examples, per_relation=10, test_fraction=0.2, seed=7)
    assert [e.id for e in train] == [e.id for e in again_train] and [e.id for e in test] == [e.id for e in again_test]
    assert Counter(e.relation for e in test) == {r: 2 for r in load_relation_set().labels}
    assert Counter(e.relation for e in train) == {r: 8 for r in load_relation_set().labels}
    _, other_test = balanced_split(examples, per_relation=10, test_fraction=0.2, seed=8)
    assert {e.id for e in other_test} != {e.id for e in test}
    assert not {e.id for e in train} & {e.id for e in test}


def test_a_bundled_datasets_split_is_its_balanced_split():
    test, _ = load_examples(DatasetConfig(name="deeplogic-130", split="test"), seed=3)
    assert len(test) == 26  # 13 relations x 10, a fifth of each
    test, _ = load_examples(DatasetConfig(split="test", split_per_relation=30), seed=3)  # deeplogic-v2, the default
    assert len(test) == 13 * 6
    with pytest.raises(DataError, match="split must be all, train or test, got 'dev'"):
        load_examples(DatasetConfig(name="deeplogic-130", split="dev"))


def test_balanced_split_needs_labels_and_a_fraction_between_0_and_1():
    examples, _ = load_examples(DatasetConfig(name="deeplogic-130", limit=4))
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\), got 1"):
        balanced_split(examples, test_fraction=1)
    from dataclasses import replace

    with pytest.raises(DataError, match="balanced_split needs relation labels; example '.*' has none"):
        balanced_split([replace(examples[0], relation=None)])


def test_balanced_split_warns_when_a_relation_is_short():
    examples, _ = load_examples(DatasetConfig(name="deeplogic-130", relations=["fuzzy", "numerical"]))
    with pytest.warns(UserWarning, match="fewer than per_relation=20"):
        train, test = balanced_split(examples, per_relation=20, test_fraction=0.2, seed=0)
    assert len(test) == 4 and len(train) == 16


def test_evidence_as_text_is_one_piece_or_cut_at_the_separator(tmp_path):
    base = {"context": CONTEXT, "question": "When did the mill close?", "answer": "In 1901."}
    pd.DataFrame([{**base, "id": "a", "evidence": "It closed in 1901 after the river silted up."},
                  {**base, "id": "b", "evidence": ""}]).to_csv(tmp_path / "d.csv", index=False)
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.csv")))
    assert examples[0].evidence == ("It closed in 1901 after the river silted up.",)  # one item, not characters
    assert examples[1].evidence == ()
    pd.DataFrame([{**base, "id": "a", "evidence": "The mill opened in 1850. || It closed in 1901."}]).to_csv(
        tmp_path / "s.csv", index=False)
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "s.csv"), evidence_separator="||"))
    assert examples[0].evidence == ("The mill opened in 1850.", "It closed in 1901.")
    pd.DataFrame([{**base, "id": "a", "evidence": ["The mill opened in 1850.", "It closed in 1901."]}]).to_parquet(
        tmp_path / "p.parquet")  # a parquet list column arrives as an array
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "p.parquet")))
    assert examples[0].evidence == ("The mill opened in 1850.", "It closed in 1901.")


def test_rows_without_labels_load_and_unanswerable_squad_questions_are_counted(tmp_path):
    squad = {"data": [{"title": "Mill", "paragraphs": [{"context": CONTEXT, "qas": [
        {"id": "q1", "question": "When did the mill open?", "answers": [{"text": "in 1850", "answer_start": 16}]},
        {"id": "q2", "question": "Who owned the mill?", "answers": [], "is_impossible": True},
        {"id": "q3", "question": "Why did it close?", "answers": [{"text": "the river silted up",
                                                                   "answer_start": 40}]}]}]}]}
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    examples, report = load_examples(DatasetConfig(kind="squad", path=str(tmp_path / "squad.json")), label_set=LABELS)
    assert [e.id for e in examples] == ["q1", "q3"] and all(e.relation is None for e in examples)
    assert report.rows_read == 3 and report.rows_kept == 2
    assert report.dropped == {"unanswerable (no gold answer)": 1}
    assert "1 unanswerable (no gold answer)" in report.describe()


def test_ids_with_surrounding_spaces_match_their_labels(tmp_path):
    rows = [{"id": f"q{i} ", **row} for i, row in enumerate(rag12000_rows(2))]  # "q0 " in the data, q0 in the labels
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    pd.DataFrame({"id": ["q0", "q1"], "relation": LABELS}).to_csv(tmp_path / "l.csv", index=False)
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl"),
                                              labels_path=str(tmp_path / "l.csv")), label_set=LABELS)
    assert [e.relation for e in examples] == LABELS


@pytest.mark.parametrize("labels", [
    pd.DataFrame({"id": [1.0, 2.0, 3.0], "relation": LABELS + ["multi_hop"]}),  # parquet: ids read as floats
    pd.DataFrame({"id": ["1.0", "2.0", "3.0"], "relation": LABELS + ["multi_hop"]}),  # a spreadsheet's text
])
@pytest.mark.parametrize("suffix", ["csv", "parquet", "jsonl"])
def test_ids_a_label_file_has_as_floats_match_the_data_s_integer_ids(tmp_path, labels, suffix):
    rows = [{"id": i + 1, **row} for i, row in enumerate(rag12000_rows(3))]  # JSON numbers 1, 2, 3
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    path = tmp_path / f"l.{suffix}"
    {"csv": lambda: labels.to_csv(path, index=False), "parquet": lambda: labels.to_parquet(path),
     "jsonl": lambda: labels.to_json(path, orient="records", lines=True)}[suffix]()
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / "d.jsonl"), labels_path=str(path)),
                                label_set=LABELS)
    assert [e.id for e in examples] == ["1", "2", "3"]
    assert [e.relation for e in examples] == LABELS + ["multi_hop"]


def test_an_id_is_one_text_whether_read_as_a_number_or_as_text():
    import numpy as np

    from opi.data import id_text

    assert {id_text(v) for v in (1, 1.0, "1", " 1.0 ", "1.00", np.float64(1.0), np.int64(1), np.float32(1))} == {"1"}
    assert [id_text(v) for v in (1.5, "1.5", "a01", "007", "1.", "1e3", True)] == [
        "1.5", "1.5", "a01", "007", "1.", "1e3", "True"]
    with pytest.raises(DataError, match=r"field 'id': duplicate id '1' \(first at row 1\)"):  # 1 and 1.0: one id
        from opi.data import validate
        validate([{"id": 1, **rag12000_rows(1)[0]}, {"id": 1.0, **rag12000_rows(1)[0]}], "d.jsonl")


def test_examples_cluster_by_dataset_group_else_their_article(tmp_path):
    from opi.chunking import document_id

    pd.DataFrame({"context": ["One text here.", "One text here.", "Another text here.", "A third text."],
                  "question": ["q1", "q2", "q3", "q4"], "answer": ["a", "b", "c", "d"],
                  "source": ["doc-7", "doc-7", None, "doc-9"]}).to_csv(tmp_path / "d.csv", index=False)
    path = str(tmp_path / "d.csv")
    grouped, _ = load_examples(DatasetConfig(kind="table", path=path, group="source"))
    assert [e.cluster for e in grouped] == ["doc-7", "doc-7", document_id("Another text here."), "doc-9"]
    by_article, _ = load_examples(DatasetConfig(kind="table", path=path))
    assert [e.cluster for e in by_article][:3] == [document_id("One text here.")] * 2 + [document_id("Another text here.")]
    with pytest.raises(DataError, match=r"\[.sorce.\] named in dataset.group are not in the file"):
        load_examples(DatasetConfig(kind="table", path=path, group="sorce"))
    bundled, _ = load_examples(DatasetConfig(limit=16))
    assert len({e.cluster for e in bundled}) < len(bundled) and all(e.cluster == e.article_id for e in bundled)


def load_error(tmp_path, **dataset):
    with pytest.raises(DataError) as raised:
        load_examples(DatasetConfig(**dataset), label_set=LABELS)
    return str(raised.value)


SKIP = " (or set dataset.on_invalid=skip to drop such rows and report them)"


def squad_file(path, *qas, paragraph=None):
    path.write_text(json.dumps({"data": [{"title": "Mill", "paragraphs": [
        paragraph or {"context": CONTEXT, "qas": []}, {"context": "It closed in 1901.", "qas": list(qas)}]}]}))
    return str(path)


def qa(qid, text="in 1901", **more):
    return {"id": qid, "question": "When did it close?", "answers": [{"text": text, "answer_start": 10}], **more}


@pytest.mark.parametrize("contents, message", [
    (json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n", "not valid JSON (Extra data at line 2, column 1)"),  # a .jsonl
    ('{"data": [{"title": "Mill", "paragraphs": [', "not valid JSON (Expecting value at line 1, column 44)"),
    (json.dumps([GOOD]), "not SQuAD format (no top-level 'data' list)"),
])
def test_a_squad_file_that_is_not_squad_json_is_one_line(tmp_path, contents, message):
    (tmp_path / "squad.json").write_text(contents)
    path = str(tmp_path / "squad.json")
    assert load_error(tmp_path, kind="squad", path=path) == f"{path}: {message}"


@pytest.mark.parametrize("qas, paragraph, message", [
    ([qa("a"), {"id": "b", "question": "Why?", "answers": [{"answer_start": 3}]}], None,
     "data[0].paragraphs[1].qas[1].answers[0] has no 'text'"),
    ([qa("a")], {"qas": []}, "data[0].paragraphs[0] has no 'context'"),
    ([qa("a"), "Why?"], None, "data[0].paragraphs[1].qas[1] is str, not a JSON object"),
])
def test_a_squad_file_missing_a_key_says_where_in_its_structure(tmp_path, qas, paragraph, message):
    path = squad_file(tmp_path / "squad.json", *qas, paragraph=paragraph)
    assert load_error(tmp_path, kind="squad", path=path) == f"{path}: {message}"


def test_a_squad_duplicate_is_named_by_its_id_and_place_among_all_the_file_s_questions(tmp_path):
    path = squad_file(tmp_path / "squad.json", qa("a"), qa("b", answers=[], is_impossible=True),
                      qa("c", answers=[]), qa("a"))
    assert load_error(tmp_path, kind="squad", path=path) == \
        f"{path}, question 4, field 'id': duplicate id 'a' (first at question 1){SKIP}"


def test_a_jsonl_row_is_its_record_and_its_line_is_said_where_blank_lines_make_it_another(tmp_path):
    # "row N" counts records, as dataset.label_join=row does; the line is what an editor shows
    path = tmp_path / "d.jsonl"
    path.write_text(f"{json.dumps(GOOD)}\n\n{json.dumps(GOOD | {'id': 'x2', 'answer': ''})}\n")
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}, row 2 (line 3), field 'answer': empty or not text (''){SKIP}"
    path.write_text(f"\n{json.dumps(GOOD)}\n\n{json.dumps(GOOD)}\n")
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}, row 2 (line 4), field 'id': duplicate id 'x1' (first at row 1 (line 2)){SKIP}"
    path.write_text(f"{json.dumps(GOOD)}\n{json.dumps(GOOD | {'answer': ''})}\n")
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}, row 2, field 'answer': empty or not text (''){SKIP}"
    path.write_text(f"{json.dumps(GOOD)}\n\n{json.dumps(GOOD | {'id': 'x2'})}\n")
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"id": "x1", "relation": "multi_hop"}\n\n{"id": "x1", "relation": "multi_hop"}\n')
    assert load_error(tmp_path, kind="table", path=str(path), labels_path=str(labels)) == \
        f"{labels}, row 2 (line 3), field 'id': 'x1' is labelled twice (first at row 1); keep one label per example"


def test_jsonl_rows_and_label_rows_by_row_count_the_same_records(tmp_path):
    path, labels = tmp_path / "d.jsonl", tmp_path / "l.csv"
    unlabelled = {k: v for k, v in GOOD.items() if k != "relation"}
    path.write_text(f"{json.dumps(unlabelled)}\n\n\n{json.dumps(unlabelled | {'id': 'x2'})}\n")
    labels.write_text("row,relation\n1,multi_hop\n2,direct_matching\n")
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(path), labels_path=str(labels),
                                              label_join="row"), label_set=LABELS)
    assert [(e.id, e.relation) for e in examples] == [("x1", "multi_hop"), ("x2", "direct_matching")]


def test_a_label_file_that_misses_examples_names_itself_and_them(tmp_path):
    path, labels = tmp_path / "d.jsonl", tmp_path / "nolab.csv"
    write_jsonl(path, [{"id": f"q{i}", **row} for i, row in enumerate(rag12000_rows(5))])
    pd.DataFrame({"id": ["q0", "q2"], "relation": LABELS}).to_csv(labels, index=False)
    assert load_error(tmp_path, kind="table", path=str(path), labels_path=str(labels)) == \
        f"{labels}: no label for 3 of the 5 examples of {path} by 'id', e.g. ['q1', 'q3', 'q4']; a label file " \
        "labels every example (or set dataset.on_invalid=skip to evaluate only the examples it labels)"
    # a sample people labelled (opi-label import): the examples it labels, the others dropped and counted
    examples, report = load_examples(DatasetConfig(kind="table", path=str(path), labels_path=str(labels),
                                                   on_invalid="skip"))
    assert [(e.id, e.relation) for e in examples] == [("q0", LABELS[0]), ("q2", LABELS[1])]
    assert report.dropped == {"not in the label file": 3} and report.rows_read == 5


def test_labels_joined_by_id_on_data_without_ids_suggest_joining_by_row(tmp_path):
    path, labels = tmp_path / "d.jsonl", tmp_path / "l.csv"
    write_jsonl(path, rag12000_rows(3))
    pd.DataFrame({"id": [1, 2, 3], "relation": LABELS + ["multi_hop"]}).to_csv(labels, index=False)
    assert load_error(tmp_path, kind="table", path=str(path), labels_path=str(labels)) == \
        f"{path} has no 'id' column to join the labels of {labels} on; join them by row number with " \
        "dataset.label_join=row"


def test_a_number_is_its_text_in_every_format_a_boolean_is_not(tmp_path):
    rows = [{"id": "a", "context": CONTEXT, "question": "How many?", "answer": 0},
            {"id": "b", "context": CONTEXT, "question": "How many more?", "answer": 42}]
    pd.DataFrame(rows).to_parquet(tmp_path / "d.parquet")
    pd.DataFrame(rows).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "d.json").write_text(json.dumps(rows))
    write_jsonl(tmp_path / "d.jsonl", rows)
    for name in ("d.parquet", "d.csv", "d.json", "d.jsonl"):
        examples, _ = load_examples(DatasetConfig(kind="table", path=str(tmp_path / name)))
        assert [e.answer for e in examples] == ["0", "42"], name
    write_jsonl(tmp_path / "b.jsonl", [rows[0] | {"answer": True}])
    assert load_error(tmp_path, kind="table", path=str(tmp_path / "b.jsonl")) == \
        f"{tmp_path / 'b.jsonl'}, row 1, field 'answer': empty or not text (True){SKIP}"


def test_a_missing_field_lists_the_columns_the_file_has(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"context": CONTEXT, "qestion": "When?", "answer": "1850"}])
    assert load_error(tmp_path, kind="table", path=str(tmp_path / "d.jsonl")) == \
        f"{tmp_path / 'd.jsonl'}, row 1: missing field(s) ['question']; the loader expects ['context', 'question', " \
        "'answer'], it has ['answer', 'context', 'qestion'] (map other column names with dataset.columns)"


def test_a_csv_saved_with_semicolons_is_said_to_be(tmp_path):
    # Excel's CSV in many locales: pandas reads one column named by the whole header
    (tmp_path / "d.csv").write_text('context;question;answer\n"Built in 1850.";"When?";"1850"\n', encoding="utf-8")
    assert load_error(tmp_path, kind="table", path=str(tmp_path / "d.csv")) == \
        f"{tmp_path / 'd.csv'}, row 1: missing field(s) ['context', 'question', 'answer']; the loader expects " \
        "['context', 'question', 'answer'], it has ['context;question;answer'] (its header looks separated by ';', " \
        "not commas: save the file as comma-separated CSV, or as .jsonl or .parquet)"


def test_all_empty_csv_rows_are_no_rows_and_later_rows_keep_their_number(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(f"id,context,question,answer\na,{CONTEXT},When?,1850\n,,,\nb,{CONTEXT},Why?,silt\n,,,\n,  ,,\n")
    examples, report = load_examples(DatasetConfig(kind="table", path=str(path)))
    assert [e.id for e in examples] == ["a", "b"] and report.rows_read == 2
    path.write_text(f"id,context,question,answer\na,{CONTEXT},When?,1850\n,,,\nb,{CONTEXT},Why?,\n,,,\n")
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}, row 3, field 'answer': empty or not text (''){SKIP}"


def test_a_relation_no_example_has_is_named_not_dropped_in_silence():
    with pytest.raises(DataError, match=r"dataset.relations: no example has the relation 'deductve'; the data's "
                                        r"relations are .*deductive \(10\)"):
        load_examples(DatasetConfig(name="deeplogic-130", relations=["direct_matching", "deductve"]))


def test_a_jsonl_text_may_hold_unicode_line_separators(tmp_path):
    path = tmp_path / "data.jsonl"
    row = {"context": "Line one.\u2028Line two\u2029and\u0085three.", "question": "Which line?", "answer": "Two."}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n" + json.dumps({**row, "answer": "One."}) + "\n",
                    encoding="utf-8")
    examples, _ = load_examples(DatasetConfig(kind="table", path=str(path)))
    assert [e.answer for e in examples] == ["Two.", "One."] and "\u2028" in examples[0].context


def test_with_skip_a_blank_label_leaves_its_example_unlabelled_and_dropped(tmp_path):
    pd.DataFrame(rag12000_rows(3)).to_parquet(tmp_path / "d.parquet")
    pd.DataFrame({"row": [1, 2, 3], "relation": [LABELS[0], None, LABELS[1]]}).to_csv(tmp_path / "l.csv", index=False)
    examples, report = load_examples(DatasetConfig(kind="rag12000", path=str(tmp_path / "d.parquet"),
                                                   labels_path=str(tmp_path / "l.csv"), label_join="row",
                                                   on_invalid="skip"), label_set=LABELS)
    assert [e.relation for e in examples] == [LABELS[0], LABELS[1]] and sum(report.dropped.values()) == 1


@pytest.mark.parametrize("invisible", ["\u200b", "\ufeff \u200d", "\u00ad\n"])
def test_a_field_of_invisible_characters_only_is_empty(tmp_path, invisible):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD | {"id": "x2", "context": invisible}) + "\n")
    assert load_error(tmp_path, kind="table", path=str(path)).startswith(f"{path}, row 2, field 'context': empty")
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD | {"id": "x2", "context": "\u200bThe mill.\u200b"}))
    assert len(load_examples(DatasetConfig(kind="table", path=str(path)), label_set=LABELS)[0]) == 2


def test_a_column_given_twice_is_refused_not_read_as_another(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(f"context,question,answer,answer,,\n{CONTEXT},When?,1850,1851,,\n")
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}: column(s) ['answer'] appear more than once in the header; keep one of each, or rename the others"
    path.write_text(f"\ufeff\ncontext,question,context\n{CONTEXT},When?,{CONTEXT}\n")  # a BOM, a blank line
    assert load_error(tmp_path, kind="table", path=str(path)).startswith(f"{path}: column(s) ['context'] appear")
    path.write_text(f'"context,question\n{CONTEXT},When?\n')  # a quote never closed: pandas says what is wrong
    assert "cannot be read as csv" in load_error(tmp_path, kind="table", path=str(path))
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:-1] + ', "answer": "1851"}\n')
    assert load_error(tmp_path, kind="table", path=str(path)) == \
        f"{path}, line 2: key(s) ['answer'] given twice in one object; keep one of each"


def test_a_label_file_replacing_the_data_s_own_relations_says_so(tmp_path):
    path, labels = tmp_path / "d.jsonl", tmp_path / "l.csv"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD | {"id": "x2", "relation": ""}) + "\n"
                    + json.dumps(GOOD | {"id": "x3"}) + "\n")
    labels.write_text("id,relation\nx1,multi_hop\nx2,multi_hop\nx3,direct_matching\n")
    examples, report = load_examples(DatasetConfig(kind="table", path=str(path), labels_path=str(labels)),
                                     label_set=LABELS)
    assert report.notes == [f"{path} has a 'relation' column of its own (2 labelled rows, 1 of them differently); "
                            f"the labels of {labels} replace it"]
    assert [e.relation for e in examples] == ["multi_hop", "multi_hop", "direct_matching"]
    # with skip, the rows the label file leaves out are dropped, not "labelled differently"
    labels.write_text("id,relation\nx1,multi_hop\nx2,multi_hop\n")
    _, report = load_examples(DatasetConfig(kind="table", path=str(path), labels_path=str(labels),
                                            on_invalid="skip"), label_set=LABELS)
    assert report.notes == [f"{path} has a 'relation' column of its own (1 labelled row, 0 of them differently); "
                            f"the labels of {labels} replace it"]
    labels.write_text("id,relation\nx1,multi_hop\n")
    path.write_text(json.dumps(GOOD | {"relation": "\u200b"}) + "\n")
    _, report = load_examples(DatasetConfig(kind="table", path=str(path), labels_path=str(labels),
                                            on_invalid="skip"), label_set=LABELS)
    assert report.notes == []  # an invisible relation is none


def test_a_question_longer_than_a_tiny_context_is_kept_an_article_sized_one_is_refused(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD | {"context": "Paris is in France.", "question": "In which country is the city "
                                                                                        "of Paris to be found?"}))
    assert [e.context for e in load_examples(DatasetConfig(kind="table", path=str(path)), label_set=LABELS)[0]] == \
        ["Paris is in France."]
    path.write_text(json.dumps(GOOD | {"context": "Paris is in France.", "question": "word " * 41}))
    assert load_error(tmp_path, kind="table", path=str(path)) == (
        f"{path}, row 1, field 'question': 41 words, longer than its context (4); are the columns swapped? (map them "
        f"with dataset.columns){SKIP}")
