"""What a configuration's job says when it ends: its scores, and one line per failure that was counted."""
from flows.run.job import failure_lines, scores_line


def test_every_counted_failure_is_one_line_and_a_clean_run_says_none():
    lines = failure_lines({"answers_missing": 6, "parse_failures": 2, "unknown_relations": 3, "judge_failures": 0,
                           "correctness_failures": 1}, 20)
    assert lines == [
        "6 of 20 questions got no answer (the LLM's reply was empty or a refusal, also when asked again): left out "
        "of BERTSim, LRCR and OPI",
        "2 of 20 relation replies could not be parsed (asked again, then recorded as 'unknown', which counts as wrong)",
        "1 of 20 answer-correctness replies could not be parsed: left out of its average",
        "1 of 20 answers got the relation 'unknown' (counted as wrong)"]
    assert failure_lines({"bertsim": 0.5, "unknown_relations": 0}, 20) == []


def test_the_scores_line_says_when_there_are_no_relations():
    assert scores_line({"bertsim": 0.5, "lrcr": 0.25, "opi_1": 1 / 3}) == "BERTSim 0.5000  LRCR 0.2500  OPI-1 0.3333"
    assert scores_line({"bertsim": 0.5}) == "BERTSim 0.5000  (no gold relations: no LRCR or OPI)"
