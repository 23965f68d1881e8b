import pytest

from opi.diagnostics import answer_found, content_words, diagnose, evidence_recall, support_recall

RETRIEVED = ["The mill at Harrow closed in 1911.", "Its  workers moved to the Dunmore quarry, two miles north."]


def test_content_words_drop_stop_words_and_keep_numbers():
    assert content_words("The workers moved to Dunmore in 1,911.") == {"workers", "moved", "dunmore", "1,911"}


def test_support_recall_by_hand():
    # content words of the answer: workers, moved, dunmore, quarry, 1912 -> 4 of 5 retrieved
    assert support_recall("The workers moved to the Dunmore quarry in 1912.", RETRIEVED) == pytest.approx(4 / 5)
    assert support_recall("It was the one.", RETRIEVED) == 1.0  # nothing to look for


def test_answer_found_ignores_case_and_spacing_and_evidence_counts_pieces():
    assert answer_found("its workers moved to the dunmore quarry", RETRIEVED)
    assert not answer_found("The workers moved to Dunmore.", RETRIEVED)
    evidence = ["The mill at Harrow closed in 1911.", "A second mill opened in 1920."]
    assert evidence_recall(evidence, RETRIEVED) == pytest.approx(1 / 2)
    assert evidence_recall((), RETRIEVED) is None
    assert diagnose("closed in 1911", evidence[:1], RETRIEVED) == {
        "support_recall": 1.0, "answer_found": 1.0, "evidence_recall": 1.0, "evidence_hit": 1.0}
    assert diagnose("closed in 1911", evidence, RETRIEVED)["evidence_hit"] == 0.0
    assert diagnose("closed in 1911", (), RETRIEVED)["evidence_hit"] is None


def test_matches_are_whole_words():
    assert not answer_found("No", ["The road ran north."]) and answer_found("no", ["There was no road."])
    assert not answer_found("1911", ["It closed in 19110."])
    assert evidence_recall(["art"], ["The work started."]) == 0.0
