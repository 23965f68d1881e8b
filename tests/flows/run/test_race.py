"""A racing sweep's pieces: names and keys of its jobs, its metric, what cannot be raced, the rounds it runs with
fake jobs of known scores, its verdict and table."""
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from omegaconf import OmegaConf

from flows.run.config import compose_config, typed
from flows.run.preflight import race_problem
from flows.run.race import RaceRun, job_key, labels_of, metric_problem, outcome_tags, outputs_of, race_metric
from flows.orchestration.files import write_atomically
from flows.tracking.race_report import RACE_FILE, race_table, read_outcome, verdict
from opi.data import Example
from opi.racing import rounds_of


def config(*overrides: str):
    return typed(compose_config(list(overrides)))


def test_jobs_are_named_by_what_sets_them_apart_and_keyed_without_what_the_race_adds():
    jobs = [["setup=knn", "retriever.k=4", "sweep.strategy=race"], ["setup=bm25", "retriever.k=4", "sweep.strategy=race"]]
    assert labels_of(jobs) == ["setup=knn", "setup=bm25"]
    assert job_key([*jobs[0], "dataset.rounds=10", "dataset.rounds_from=1", "dataset.rounds_to=3", "race.record=true",
                    "tracking.enabled=false", "report.enabled=false"]) == " ".join(jobs[0])


def test_the_race_metric_is_the_report_s_headline_unless_chosen():
    assert race_metric(config()) == "opi_1"
    assert race_metric(config("beta=opi-2")) == "opi_2"
    assert race_metric(config("relations.gold=none")) == "bertsim"
    assert race_metric(config("race.metric=ndcg_at_4")) == "ndcg_at_4"
    assert metric_problem(config("race.metric=ndcg_at_4")) is None
    assert "needs gold relations" in metric_problem(config("relations.gold=none", "race.metric=lrcr"))
    assert "not a per-example metric" in metric_problem(config("race.metric=latency"))
    assert metric_problem(config("race.metric=recall_at_8")) is None and metric_problem(config("race.metric=opi_0_5")) \
        is None
    assert metric_problem(config("race.metric=ndcg_at_3")) == (
        "race.metric=ndcg_at_3: the sweep computes ndcg_at_<k> for k in metrics.retrieval_k=[1, 2, 4, 8]: race on one "
        "of those, or add the cut-off there")
    assert metric_problem(config("race.metric=ndcg_at_3", "metrics.retrieval_k=[3]")) is None
    assert "recall_at_<k> for k in" in metric_problem(config("race.metric=recall_at_0"))
    for beta in ("opi_abc", "opi_0", "opi_"):
        assert "OPI's β is a number above 0" in metric_problem(config(f"race.metric={beta}")), beta
    assert "needs the answer-correctness judge" in metric_problem(config("race.metric=correctness"))


def test_what_cannot_be_raced_is_said_in_one_line():
    race = ["sweep.strategy=race"]
    assert race_problem([config()]) is None and race_problem([config(), config("setup=bm25")]) is None  # grids
    assert "at least two configurations" in race_problem([config(*race)])
    assert "dataset.* must not vary" in race_problem([config(*race), config(*race, "dataset.limit=10")])
    assert "race.* must not vary" in race_problem([config(*race), config(*race, "race.alpha=0.1")])
    assert "not a per-example metric" in race_problem([config(*race, "race.metric=x"),
                                                       config(*race, "race.metric=x", "setup=bm25")])
    assert race_problem([config(*race), config(*race, "setup=bm25")]) is None
    assert "S-Two | extractive | local-clf has no ranking" in race_problem(
        [config(*race, "race.metric=mrr"), config(*race, "race.metric=mrr", "setup=s_two")])
    assert "this sweep has none (the random and oracle bounds are not raced)" in race_problem(
        [config(*race, "setup=random"), config(*race, "setup=oracle")])
    with pytest.raises(ValueError, match="race.budget must be a finite number > 0"):
        config("race.budget=0")
    assert "lists one configuration twice (kNN | extractive | local-clf)" in race_problem(
        [config(*race), config(*race), config(*race, "setup=bm25")])


def test_a_budget_in_a_unit_the_sweep_never_spends_is_refused():
    race = ["sweep.strategy=race", "race.budget=5"]
    two = ["setup=knn", "setup=bm25"]
    assert race_problem([config(*race, s) for s in two]) is None  # examples: always spent
    assert "no configuration of this sweep calls an LLM or embedding endpoint" in race_problem(
        [config(*race, "race.budget_unit=llm_calls", s) for s in two])
    endpoint = ["llm=openai-compatible", "llm.model=m", "llm.base_url=http://127.0.0.1:9/v1", "llm.api_key_env=null"]
    assert race_problem([config(*race, "race.budget_unit=llm_calls", *endpoint, s) for s in two]) is None
    assert "every endpoint of this sweep is priced at 0" in race_problem(
        [config(*race, "race.budget_unit=usd", *endpoint, s) for s in two])
    assert race_problem([config(*race, "race.budget_unit=usd", *endpoint, "llm.price_output_per_million=10", s)
                         for s in two]) is None


def examples(clusters: int) -> list[Example]:
    return [Example(f"c{c}-{i}", f"article {c}", "q", "a", "deductive", group=f"c{c}")
            for c in range(clusters) for i in range(2)]


class FakeJobs:
    """Round jobs whose per-example similarity is known: ``truth[setup]`` (a number, or one per cluster: a function of
    it) plus a fixed noise of up to ``noise`` per cluster; each job's rows and metrics written where a Hydra job writes them, and read back as a race reads a
    launcher's jobs (``outputs_of``)."""

    def __init__(self, folder: Path, data: list[Example], truth: dict[str, float], noise: float = 0.0):
        self.folder, self.data, self.truth, self.noise, self.batches = folder, data, truth, noise, []

    def __call__(self, batch):
        self.batches.append(batch)
        returns = []
        for job in batch:
            settings = dict(o.split("=", 1) for o in job)
            plan = rounds_of(self.data, int(settings["dataset.rounds"]), 0)
            first, last = int(settings["dataset.rounds_from"]), int(settings["dataset.rounds_to"])
            clusters = {c for r in plan[first - 1:last] for c in r}
            rows = [e for e in self.data if e.cluster in clusters]
            setup = settings["setup"]
            truth = self.truth[setup] if callable(self.truth[setup]) else (lambda _, v=self.truth[setup]: v)
            value = [truth(e.cluster) + random.Random(f"{setup}{e.cluster}").uniform(-self.noise, self.noise)
                     for e in rows]
            out = self.folder / f"{len(self.batches)}-{setup}"
            out.mkdir()
            pd.DataFrame({"cluster": [e.cluster for e in rows], "similarity": value, "relation": "deductive",
                          "predicted_relation": "deductive"}).to_parquet(out / "predictions.parquet")
            (out / "metrics.json").write_text(json.dumps({"llm_answer_http_requests": len(rows),
                                                          "llm_cost_usd": 0.01 * len(rows),  # kNN embeds 2 a row
                                                          "texts_embedded": 2 * len(rows) * (setup == "knn")}))
            returns.append(SimpleNamespace(return_value=0.0, hydra_cfg=OmegaConf.create(
                {"hydra": {"runtime": {"output_dir": str(out)}}})))
        return [outputs_of(returned) for returned in returns]


def test_a_race_drops_the_clearly_worse_rounds_by_round_and_records_what_each_ran(tmp_path):
    data = examples(40)
    fake = FakeJobs(tmp_path, data, {"knn": 0.8, "bm25": 0.79, "random": 0.2}, noise=0.1)
    jobs = [["setup=knn"], ["setup=bm25"], ["setup=random"]]
    cfg = config("sweep.strategy=race", "race.metric=bertsim", "race.rounds=8", "race.min_clusters=5",
                 "race.margin=0")
    run = RaceRun(jobs, cfg, data, fake)
    outcome = run.run()
    # round 1 (5 clusters): random, 0.6 below, is dropped; knn and bm25, 0.01 apart in noise of +-0.1, race on
    # to the end of the data
    assert [len(b) for b in fake.batches] == [3, 2, 2, 2, 2, 2, 2, 2]
    assert outcome["survivors"] == ["setup=knn", "setup=bm25"] and outcome["stopped"] == "the data was exhausted"
    assert [e["configuration"] for e in outcome["eliminated"]] == ["setup=random"]
    random_ = outcome["jobs"]["setup=random"]
    assert random_["outcome"] == "eliminated" and random_["low"] is not None  # dropped by the strongest evidence
    assert random_["leader"] in ("setup=knn", "setup=bm25")
    assert random_["difference"] == pytest.approx(-0.6, abs=0.1) and random_["high"] < 0
    assert random_["rounds_run"] == 1 and random_["examples"] == 10 and random_["clusters"] == 5
    assert outcome["jobs"]["setup=knn"]["examples"] == 80 and outcome["jobs"]["setup=knn"]["leader"] is None
    assert outcome["spent"] == {"examples": 170, "llm_calls": 170, "usd": pytest.approx(1.7), "texts_embedded": 160,
                                "texts_embedded_ahead": 0}
    assert outcome["grid_examples"] == 240
    assert run.record_jobs()[2] == ["setup=random", "dataset.rounds=8", "dataset.rounds_from=1",
                                    "dataset.rounds_to=1", "race.record=true"]
    text = verdict(outcome)
    assert "Race of 3 configurations by bertsim" in text and "among the 2 survivors: setup=knn, setup=bm25" in text
    assert "170 of the full grid's 240 example evaluations (71%)" in text
    table = race_table(outcome)
    assert list(table["configuration"])[2] == "setup=random"
    assert list(table["outcome"]) == ["survivor", "survivor", "eliminated"]
    write_atomically(tmp_path / RACE_FILE, lambda path: path.write_text(json.dumps(outcome)))
    assert read_outcome(tmp_path) == json.loads(json.dumps(outcome))


def test_with_an_indifference_zone_the_leader_stands_for_those_within_it_and_the_verdict_says_so(tmp_path):
    data = examples(40)
    fake = FakeJobs(tmp_path, data, {"knn": 0.8, "bm25": 0.8, "random": 0.2}, noise=0.005)
    outcome = RaceRun([["setup=knn"], ["setup=bm25"], ["setup=random"]],
                      config("sweep.strategy=race", "race.metric=bertsim", "race.rounds=8", "race.min_clusters=5",
                             "race.margin=0", "race.indifference=0.02"), data, fake).run()
    # round 1 (5 clusters): random is worse; knn and bm25 differ by noise of +-0.005, far inside 0.02, so the leader
    # drops the other as within it, and the race is over after one round of the eight
    assert len(fake.batches) == 1 and outcome["stopped"] == "one configuration was left"
    (survivor,) = outcome["survivors"]
    other = ({"setup=knn", "setup=bm25"} - {survivor}).pop()
    within = outcome["jobs"][other]
    assert within["outcome"] == "eliminated" and within["within"] and within["leader"] == survivor
    assert within["high"] < 0.02 and not outcome["jobs"]["setup=random"]["within"]  # its bound of it - the leader
    assert "with about 95% confidence one within 0.02 of the best of these 3 on this data is " + survivor \
        in verdict(outcome)
    table = race_table(outcome).set_index("configuration")
    assert table.loc[other, "dropped_as"] == "within" and table.loc["setup=random", "dropped_as"] == "worse"
    assert outcome_tags(outcome, other)["opi.race.against"].endswith("dropped as within race.indifference=0.02")


def test_a_race_stops_once_a_leader_that_overtook_a_kept_configuration_is_shown_within_the_zone_of_it(tmp_path):
    data = examples(40)
    first = set(rounds_of(data, 8, 0)[0])  # round 1's clusters (5)
    swinging = {c: 0.45 + 0.1 * (i % 2) for i, c in enumerate(sorted(first))}  # 0.45, 0.55, ...: mean 0.49

    def tfidf(cluster: str) -> float:  # far spread in round 1, then 0.005 ahead of knn and bm25 on every cluster
        return swinging.get(cluster, 0.505)

    fake = FakeJobs(tmp_path, data, {"knn": 0.5, "bm25": 0.5, "tfidf": tfidf})
    outcome = RaceRun([["setup=knn"], ["setup=bm25"], ["setup=tfidf"]],
                      config("sweep.strategy=race", "race.metric=bertsim", "race.rounds=8", "race.min_clusters=5",
                             "race.margin=0", "race.indifference=0.02"), data, fake).run()
    # round 1: knn leads (bm25 equal, tfidf 0.01 behind in a wide spread) and drops bm25 as within 0.02: knn is kept,
    # never dropped. tfidf then overtakes it, not by enough to be shown better; once knn is shown no worse than tfidf
    # by more than 0.02 (after round 5), knn stands for it too and the race stops. Before, it ran to the data's end:
    # tfidf could drop no one, and nothing could drop it
    assert [e["configuration"] for e in outcome["eliminated"]] == ["setup=bm25"]
    assert outcome["survivors"] == ["setup=knn", "setup=tfidf"] and outcome["leader"] == "setup=tfidf"
    assert outcome["stopped"] == ("each of the 2 left stands for those within race.indifference=0.02 of it, is "
                                  "shown within it of one that does, or is shown better than all the others")
    assert len(fake.batches) == 5


def test_survivors_within_the_margin_are_a_tie_and_the_race_stops(tmp_path):
    data = examples(40)
    fake = FakeJobs(tmp_path, data, {"knn": 0.5, "bm25": 0.5}, noise=0.01)
    outcome = RaceRun([["setup=knn"], ["setup=bm25"]], config("sweep.strategy=race", "race.metric=bertsim",
                      "race.rounds=4", "race.margin=0.05"), data, fake).run()
    assert outcome["stopped"].startswith("the survivors were within race.margin=0.05") and len(fake.batches) == 1


def test_what_was_embedded_ahead_is_stopped_when_the_race_ends_and_counted_in_what_it_spent(tmp_path):
    class Ahead:  # embedded 30 texts of round 2 while round 1 ran; the race stops after round 1
        texts_embedded, stopped = 30, 0

        def stop(self):
            self.stopped += 1

    data, ahead = examples(40), Ahead()
    fake = FakeJobs(tmp_path, data, {"knn": 0.5, "bm25": 0.5}, noise=0.01)
    outcome = RaceRun([["setup=knn"], ["setup=bm25"]], config("sweep.strategy=race", "race.metric=bertsim",
                      "race.rounds=4", "race.margin=0.05"), data, fake, ahead=ahead).run()
    assert len(fake.batches) == 1 and ahead.stopped == 1
    assert outcome["spent"]["texts_embedded"] == 2 * 20 + 30 and outcome["spent"]["texts_embedded_ahead"] == 30


def test_a_race_without_a_clear_difference_runs_until_the_data_or_the_budget_ends(tmp_path):
    data = examples(40)
    jobs = [["setup=knn"], ["setup=bm25"]]
    base = ["sweep.strategy=race", "race.metric=bertsim", "race.rounds=4", "race.margin=0"]
    (tmp_path / "a").mkdir()
    outcome = RaceRun(jobs, config(*base), data, FakeJobs(tmp_path / "a", data, {"knn": 0.5, "bm25": 0.5})).run()
    assert outcome["stopped"] == "the data was exhausted" and len(outcome["survivors"]) == 2
    assert outcome["spent"]["examples"] == 160  # every example, both configurations
    (tmp_path / "b").mkdir()
    fake = FakeJobs(tmp_path / "b", data, {"knn": 0.5, "bm25": 0.5})
    outcome = RaceRun(jobs, config(*base, "race.budget=50"), data, fake).run()
    assert outcome["stopped"] == "race.budget=50 examples was spent (80 after the round)" and len(fake.batches) == 2  # 40, then 80


def test_bounds_are_not_raced_but_run_once_on_the_rounds_the_race_ran(tmp_path):
    data = examples(40)
    fake = FakeJobs(tmp_path, data, {"knn": 0.5, "bm25": 0.5, "random": 0.1}, noise=0.2)
    run = RaceRun([["setup=knn"], ["setup=bm25"], ["setup=random"]],
                  config("sweep.strategy=race", "race.metric=bertsim", "race.rounds=4", "race.budget=50"),
                  data, fake, bounds=[2])
    outcome = run.run()
    assert all("setup=random" not in job for batch in fake.batches for job in batch)  # never in a round
    assert outcome["jobs"]["setup=random"]["outcome"] == "bound" and outcome["grid_examples"] == 160
    assert outcome["configurations"] == 2 and len(fake.batches) == 2  # 40 evaluations a round: 80 >= 50 after round 2
    assert run.record_jobs()[2] == ["setup=random", "dataset.rounds=4", "dataset.rounds_from=1",
                                    "dataset.rounds_to=2", "race.record=true"]
    assert list(race_table(outcome)["outcome"]) == ["survivor", "survivor", "bound"]
    bound = outcome["jobs"]["setup=random"]
    assert (bound["clusters"], bound["examples"]) == (20, 40)  # the rounds it is recorded on, as the survivors'
    outcome = json.loads(json.dumps(outcome))  # as the tracked runs read it from race.json
    assert outcome_tags(outcome, "setup=random") == {"opi.race.outcome": "bound", "opi.race.metric": "bertsim",
                                                     "opi.race.rounds_run": "2 of 4"}
    knn = outcome_tags(outcome, "setup=knn")
    assert knn["opi.race.outcome"] == "survivor" and knn["opi.race.rounds_run"] == "2 of 4"
    assert knn["opi.race.estimate"].endswith("over 20 clusters") and knn["opi.race.spent"].startswith("40 example")
    assert outcome_tags(outcome, "setup=mmr") == {"opi.race.outcome": "unknown (no race.json entry)"}


def test_a_tracked_run_is_its_rounds_put_together_scored_once():
    from flows.run.race import assembled
    from flows.orchestration.results import Scores
    from opi.metrics.configuration import configuration_metrics

    def rows(ids, similarity, correct):
        return pd.DataFrame({"id": ids, "cluster": [f"a{i[1]}" for i in ids], "relation": "deductive",
                             "predicted_relation": ["deductive" if c else "fuzzy" for c in correct],
                             "similarity": similarity, "generated_answer": "x"})

    first = Scores({"bertsim": 0.0, "texts_embedded": 10.0, "classifier_cv_accuracy": 0.4, "seconds_total": 2.0},
                   rows(["e1", "e2"], [0.9, 0.5], [True, False]), None, {"e1": {"r": 1}, "e2": {"r": 2}}, 7)
    second = Scores({"bertsim": 1.0, "texts_embedded": 5.0, "classifier_cv_accuracy": 0.4, "llm_answer_calls": 3.0},
                    rows(["e3"], [0.7], [True]), None, {"e3": {"r": 3}}, 7)
    cfg = config("race.record=true")
    result = assembled(cfg, [second, first], ["deductive", "fuzzy"], ["e1", "e2", "e3"])  # in the data's order
    union = pd.concat([first.predictions, second.predictions], ignore_index=True)
    expected, _ = configuration_metrics(union, ["deductive", "fuzzy"], cfg.metrics.betas, cfg.metrics.beta,
                                        cfg.report.confidence, cfg.report.resamples, cfg.seed, cfg.report.unit)
    assert result.metrics["bertsim"] == pytest.approx(0.7) == pytest.approx(expected["bertsim"])  # scored once
    assert result.metrics["lrcr"] == pytest.approx(2 / 3)
    assert all(result.metrics[k] == pytest.approx(v) for k, v in expected.items())
    assert result.metrics["texts_embedded"] == 15.0 and result.metrics["seconds_total"] == 2.0  # summed
    assert result.metrics["llm_answer_calls"] == 3.0 and result.metrics["classifier_cv_accuracy"] == 0.4  # shared
    assert result.metrics["bertsim_ci_low"] == expected["bertsim_ci_low"]  # the bootstrap sees the data's order
    assert list(result.predictions["id"]) == ["e1", "e2", "e3"] and set(result.traces) == {"e1", "e2", "e3"}


def test_a_tracked_run_finds_its_outcome_when_the_sweep_sets_what_the_rounds_also_set(tmp_path):
    """A sweep of the user's with ``report.enabled=false`` (the nightly's set has it; the rounds add it too): the
    tracked runs, keyed by their own overrides, still find their entries in race.json."""
    data = examples(40)
    jobs = [["setup=knn", "report.enabled=false"], ["setup=bm25", "report.enabled=false"]]
    run = RaceRun(jobs, config("sweep.strategy=race", "race.metric=bertsim", "race.rounds=4", "race.margin=0"), data,
                  FakeJobs(tmp_path, data, {"knn": 0.5, "bm25": 0.5}))
    outcome = json.loads(json.dumps(run.run()))
    for tracked in run.record_jobs():
        assert outcome_tags(outcome, job_key(tracked))["opi.race.outcome"] == "survivor"
