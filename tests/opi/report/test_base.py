import pandas as pd

from opi.report.base import Configuration, display, labels_of


def configuration(name: str) -> Configuration:
    return Configuration(name, "single", name, pd.DataFrame())


def test_metrics_are_displayed_by_their_names():
    assert [display(m) for m in ("opi_1", "opi_0_5", "bertsim", "lrcr", "ndcg_at_4", "recall_at_10", "mrr")] == [
        "OPI-1", "OPI-0.5", "BERTSim", "LRCR", "nDCG@4", "recall@10", "MRR"]


def test_full_run_names_are_shortened_to_what_varies():
    labels, fixed = labels_of([configuration("kNN | extractive | local-clf"),
                               configuration("A-Four | extractive | local-clf")])
    assert labels == {"kNN | extractive | local-clf": "kNN", "A-Four | extractive | local-clf": "A-Four"}
    assert fixed == (("reader", "extractive"), ("classifier", "local-clf"))
    labels, fixed = labels_of([configuration("kNN | extractive"), configuration("kNN | gpt-4o")])
    assert list(labels.values()) == ["kNN · extractive", "kNN · gpt-4o"] and fixed == ()  # no classifier: none


def test_names_the_caller_gives_are_kept_with_its_fixed_parts():
    given = (("reader", "gpt-4o"),)
    assert labels_of([configuration("kNN k=2"), configuration("kNN k=4")], given) == (
        {"kNN k=2": "kNN k=2", "kNN k=4": "kNN k=4"}, given)
    assert labels_of([configuration("kNN | x | y")], given)[1] == given  # the caller's parts win
