"""What a sweep's run pages say: each child's place in one line, the ranking as a Markdown table MLflow renders."""
import re

from flows.tracking.notes import LONGEST, Placed, limited, ordinal, placement_notes, ranking_table, with_interval


def test_ordinals_and_intervals():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th", "112th"]
    assert with_interval(0.28549, 0.24412, 0.32351) == "0.285 [0.244, 0.324]"
    assert with_interval(0.28549, None, float("nan")) == "0.285"


RANKING = [Placed("u", "Oracle", 0.61, 0.55, 0.66, "upper", "higher", 0.0004),
           Placed("a", "A-Four", 0.312, 0.28, 0.341, None, "best"),
           Placed("k", "kNN", 0.285, 0.244, 0.324, None, "not distinguishable", 0.21),
           Placed("b", "BM25", 0.2, 0.17, 0.23, None, "lower", 0.012),
           Placed("r", "Random", 0.05, 0.03, 0.07, "lower", "lower", 0.0001)]


def test_each_child_says_how_it_placed_among_the_real_configurations():
    notes = placement_notes(RANKING, "opi_1")
    assert notes["a"] == "1st of 3 by OPI-1: 0.312 [0.280, 0.341]; the best"
    assert notes["k"] == "2nd of 3 by OPI-1: 0.285 [0.244, 0.324]; not distinguishable from the best (A-Four), " \
                         "adjusted p = 0.21"
    assert notes["b"] == "3rd of 3 by OPI-1: 0.200 [0.170, 0.230]; lower than the best (A-Four), adjusted p = 0.012"
    assert notes["u"] == ("the upper bound (oracle retrieval), a reference point, not ranked; OPI-1 0.610 "
                          "[0.550, 0.660]; higher than the best (A-Four), adjusted p = 0.0004")
    assert notes["r"].startswith("the lower bound (random retrieval), a reference point, not ranked; OPI-1 0.050")
    assert all("\n" not in line for line in notes.values())


def test_before_the_report_a_place_has_no_verdict():
    plain = [Placed(p.run_id, p.name, p.value, p.low, p.high, p.bound) for p in RANKING]
    assert placement_notes(plain, "opi_1_calibrated")["k"] == "2nd of 3 by calibrated OPI-1: 0.285 [0.244, 0.324]"


def test_the_ranking_table_puts_every_value_under_its_header():
    metrics = {p.run_id: {"opi_1": (p.value, p.low, p.high), "bertsim": (p.value / 2, None, None)} for p in RANKING}
    lines = ranking_table(RANKING, metrics, "opi_1").splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if not set(line) <= set("|-: ")]
    assert cells[0] == ["#", "configuration", "OPI-1", "BERTSim"]
    assert cells[1:] == [["(upper bound)", "Oracle", "0.610 [0.550, 0.660]", "0.305"],
                         ["1", "A-Four", "0.312 [0.280, 0.341]", "0.156"],
                         ["2", "kNN", "0.285 [0.244, 0.324]", "0.142"],
                         ["3", "BM25", "0.200 [0.170, 0.230]", "0.100"],
                         ["(lower bound)", "Random", "0.050 [0.030, 0.070]", "0.025"]]
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 5 for line in lines)


def test_a_description_fits_a_tag():
    assert limited("x" * 10) == "x" * 10
    cut = limited("x" * (LONGEST + 5))
    assert len(cut) == LONGEST and cut.endswith("(cut here: the whole is in the run's artifacts)")
