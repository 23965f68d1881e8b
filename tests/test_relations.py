import pytest

from opi.relations import gold_source


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
