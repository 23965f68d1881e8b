import pytest

from opi.relations import UNKNOWN, RelationSet, gold_source, load_relation_set


@pytest.mark.parametrize("requested, labelled, can_label, expected, notice", [
    (None, "all", True, "labels", None),
    (None, "all", False, "labels", None),
    (None, "none", True, "classifier", "the classifier clf labels each gold"),
    (None, "none", False, "none", "LRCR and OPI are not"),
    ("classifier", "all", True, "classifier", None),  # the paper's way, even where labels exist
    ("none", "some", False, "none", None),
    ("none", "all", True, "none", None),
])
def test_where_gold_relations_come_from(requested, labelled, can_label, expected, notice):
    source, said = gold_source(requested, labelled, can_label, "clf", "data.jsonl")
    assert source == expected
    assert (said is None) if notice is None else (notice in said and "data.jsonl has no relation labels" in said)


@pytest.mark.parametrize("requested, labelled, can_label, message", [
    ("labels", "none", True, "relations.gold=labels, but data.jsonl has no relation labels"),
    ("classifier", "none", False, "learns from labelled examples: give it a labelled file (classifier.train_path"),
    (None, "some", True, "some rows have a relation label and some do not"),
    ("labels", "some", True, "some rows have a relation label and some do not"),
])
def test_a_request_the_data_cannot_meet_is_refused(requested, labelled, can_label, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        gold_source(requested, labelled, can_label, "clf", "data.jsonl")


def test_the_packaged_set_has_the_papers_thirteen_relations():
    relations = load_relation_set()
    assert relations.name == "paper13" and len(relations) == 13
    assert relations.labels[:3] == ["direct_matching", "multi_hop", "deductive"]  # the file's order
    assert "fuzzy" in relations and UNKNOWN not in relations
    assert relations.definitions["numerical"].startswith("Arithmetic over figures in the article")


def test_a_label_set_from_a_yaml_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("labels:\n  when: about time\n  why: about causes\n")
    relations = load_relation_set(str(path))
    assert relations == RelationSet("mine", {"when": "about time", "why": "about causes"})  # named by the file
    path.write_text("name: custom\nlabels:\n  1: one\n  2: two\n")
    assert load_relation_set(str(path)) == RelationSet("custom", {"1": "one", "2": "two"})  # labels are text


@pytest.mark.parametrize("content, message", [
    ("labels: {}\n", "must have a non-empty 'labels' mapping"),
    ("labels: [a, b]\n", "must have a non-empty 'labels' mapping"),
    ("- a\n", "must have a non-empty 'labels' mapping"),
    ("labels:\n  unknown: none of them\n  a: b\n", "'unknown' is reserved for unclassifiable answers"),
])
def test_a_bad_label_file_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_relation_set(str(path))


def test_an_unknown_set_name_says_what_to_give():
    with pytest.raises(ValueError, match=r"unknown relation set 'paper99': give a packaged name \(paper13\) or a "
                                         r"\.yaml path"):
        load_relation_set("paper99")
