"""Calibrated LRCR and OPI-1 by article: the PPI interval's clusters, the bootstrap drawing whole articles, and the
labels planned for a half-width."""
import math

import numpy as np
import pytest
from scipy.stats import norm

from opi.metrics.calibration import MIN_PER_RELATION, calibrated_lrcr, cluster_draws, labels_for_width
from opi.metrics.opi import opi
from opi.metrics.ppi import labels_needed, stratified_ppi_mean

RELATIONS = np.array(["deductive", "fuzzy", "multi_hop"])


def clustered_answers(seed: int, articles: int = 30, questions: int = 8, labels: int = 90, effect: float = 0.0):
    """Per answer: machine and human correctness (NaN where not labelled), gold relation drawn per question (so
    articles mix relations), similarity, article. ``effect``: how far an article's answers are all right or all
    wrong together (0: independent answers)."""
    rng = np.random.default_rng(seed)
    article = np.repeat(np.arange(articles), questions)
    shift = rng.normal(0, effect, articles)[article]
    human = (rng.random(len(article)) < np.clip(0.6 + shift, 0, 1)).astype(float)
    machine = np.where(rng.random(len(article)) < 0.8, human, 1 - human)
    similarity = np.clip(0.5 + shift / 2 + rng.normal(0, 0.1, len(article)), 0, 1)
    unlabelled = rng.permutation(len(article))[labels:]
    human[unlabelled] = np.nan
    return machine, human, rng.choice(RELATIONS, len(article)), similarity, article


def test_one_answer_per_cluster_is_the_per_answer_calibration():
    machine, human, relations, similarity, _ = clustered_answers(0)
    alone = calibrated_lrcr(machine, human, relations, similarity, resamples=200, seed=3)
    singletons = calibrated_lrcr(machine, human, relations, similarity, resamples=200, seed=3,
                                 clusters=[f"q{i}" for i in range(len(machine))])
    assert singletons == pytest.approx(alone, abs=1e-9)


def test_the_lrcr_interval_is_the_cluster_robust_stratified_ppi():
    machine, human, relations, similarity, article = clustered_answers(1)
    found = calibrated_lrcr(machine, human, relations, similarity, resamples=100, clusters=article)
    labelled = ~np.isnan(human)
    expected = stratified_ppi_mean(human[labelled], machine[labelled], relations[labelled], machine[~labelled],
                                   relations[~labelled], 0.05, MIN_PER_RELATION, article[labelled],
                                   article[~labelled])
    assert expected.clusters == 30
    assert (found["lrcr_calibrated"], found["lrcr_calibrated_ci_low"], found["lrcr_calibrated_ci_high"]) == (
        pytest.approx(expected.value), pytest.approx(max(expected.low, 0)), pytest.approx(min(expected.high, 1)))


def test_the_bootstrap_draws_whole_articles():
    # 3 articles of 2, 3 and 1 answers, mixing relations: every resample holds 3 articles (with replacement), each
    # article's answers the same number of times
    clusters, cells = np.array([0, 0, 1, 1, 1, 2]), np.array(list("abbaab"))
    for index in cluster_draws(clusters, cells, resamples=50, seed=0):
        times = np.bincount(index, minlength=6)
        assert times[0] == times[1] and times[2] == times[3] == times[4]
        assert times[0] + times[2] + times[5] == 3
    # one answer per cluster, each in its cell: drawn within cells (each cell keeps its size, as before clusters)
    for index in cluster_draws(np.arange(6), cells, resamples=50, seed=0):
        assert sorted(cells[index]) == sorted(cells)


def test_opi_1_interval_is_wider_by_article_where_articles_share_their_fate():
    machine, human, relations, similarity, article = clustered_answers(2, effect=0.3)
    by_answer = calibrated_lrcr(machine, human, relations, similarity, resamples=400)
    by_article = calibrated_lrcr(machine, human, relations, similarity, resamples=400, clusters=article)
    assert by_article["opi_1_calibrated"] == by_answer["opi_1_calibrated"]  # the estimate is the same
    width = {name: r["opi_1_calibrated_ci_high"] - r["opi_1_calibrated_ci_low"]
             for name, r in (("answer", by_answer), ("article", by_article))}
    print(width)
    assert width["article"] > 1.3 * width["answer"]
    lrcr = {name: r["lrcr_calibrated_ci_high"] - r["lrcr_calibrated_ci_low"]
            for name, r in (("answer", by_answer), ("article", by_article))}
    assert lrcr["article"] > lrcr["answer"]


def test_labels_for_width_with_the_design_effect():
    z = norm.ppf(0.975)
    assert labels_for_width(0.1, None, 1000) == (math.ceil(z**2 * 0.25 / 0.01), True)  # 97: no clusters
    clustered = labels_for_width(0.1, None, 1000, icc=0.3, same_cluster=0.01)
    assert clustered == (labels_needed(0.1, None, icc=0.3, same_cluster=0.01), True) and clustered[0] > 97
    assert labels_for_width(0.1, None, 120, icc=0.3, same_cluster=0.01) == (120, False)  # more than every answer
    assert labels_for_width(0.05, None, 416, icc=0.3, same_cluster=0.0169) == (416, False)  # unreachable: math.inf
    with pytest.raises(ValueError):
        labels_for_width(1.5, None, 10)


def test_opi_1_is_0_where_the_labels_say_no_answer_has_its_relation():
    # two relations of 4 answers, 2 labelled each (fewer than MIN_PER_RELATION: one shared correction, the mean of
    # machine - human over the 4 labels = (0 + 0 + 1 + 1) / 4 = 0.5): A's LRCR 0 - 0.5, B's 1 - 0.5; their mean 0.
    # Each clipped first, A's -0.5 would count as 0 and OPI-1 would be opi(0.8, 0.25) = 0.381
    machine = np.array([0, 0, 0, 0, 1, 1, 1, 1], float)
    human = np.array([0, 0, np.nan, np.nan, 0, 0, np.nan, np.nan])
    relations = np.array(["a"] * 4 + ["b"] * 4)
    result = calibrated_lrcr(machine, human, relations, np.full(8, 0.8), resamples=50)
    assert result["opi_1_calibrated"] == 0.0
    assert opi(0.8, 0.25) == pytest.approx(0.381, abs=5e-4)
