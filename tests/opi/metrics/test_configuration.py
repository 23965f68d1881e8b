"""opi.metrics.configuration: one configuration's numbers from its per-example rows, on hand-made rows."""
import pandas as pd
import pytest

from opi.metrics.configuration import as_reused, configuration_metrics, has_gold_relations, means, usage_totals

RELATIONS = ["deductive", "fuzzy", "temporal"]


def four_rows(**columns) -> pd.DataFrame:
    """deductive: right (0.9), wrong (0.5); fuzzy: right (0.6), unknown (0.2)."""
    return pd.DataFrame({"id": ["e1", "e2", "e3", "e4"], "relation": ["deductive", "deductive", "fuzzy", "fuzzy"],
                         "predicted_relation": ["deductive", "fuzzy", "fuzzy", "unknown"],
                         "similarity": [0.9, 0.5, 0.6, 0.2], **columns})


def metrics_of(rows, betas=(1.0,), beta=1.0):
    return configuration_metrics(rows, RELATIONS, list(betas), beta, resamples=500)


def test_headline_metrics_by_hand():
    metrics, table = metrics_of(four_rows(), betas=[0.5, 2.0])
    assert metrics["bertsim"] == pytest.approx(0.55)  # (0.9 + 0.5 + 0.6 + 0.2) / 4
    assert metrics["lrcr"] == pytest.approx(0.5)  # 2 of 4; unknown counts as wrong
    # per relation: deductive B 0.7, L 0.5; fuzzy B 0.4, L 0.5. Formula (3): OPI of mean B 0.55 and mean L 0.5
    assert metrics["opi_1"] == pytest.approx(2 * 0.55 * 0.5 / (0.55 + 0.5))  # 0.5238
    assert metrics["opi_2"] == pytest.approx(5 * 0.55 * 0.5 / (0.55 + 4 * 0.5))  # 0.5392
    assert metrics["opi_0_5"] == pytest.approx(1.25 * 0.55 * 0.5 / (0.55 + 0.25 * 0.5))  # 0.5093
    # the mean of per-relation OPI-1: (2 * .35 / 1.2 + 2 * .2 / .9) / 2 = (0.5833 + 0.4444) / 2
    assert metrics["opi_1_mean"] == pytest.approx((0.7 / 1.2 + 0.4 / 0.9) / 2)
    assert metrics["opi"] == metrics["opi_1"]  # the chosen beta
    assert (metrics["n_examples"], metrics["relations_present"], metrics["unknown_relations"]) == (4, 2, 1)
    assert list(table["relation"]) == ["deductive", "fuzzy"]  # temporal has no examples: no row, not a 0


def test_the_chosen_beta_is_computed_even_when_not_listed():
    metrics, _ = metrics_of(four_rows(), betas=[1.0], beta=2.0)
    assert metrics["opi"] == metrics["opi_2"] == pytest.approx(5 * 0.55 * 0.5 / (0.55 + 4 * 0.5))
    assert "opi_1" in metrics


def test_per_relation_metrics_are_flattened_into_the_run_metrics():
    metrics, _ = metrics_of(four_rows())
    assert (metrics["n.deductive"], metrics["bertsim.deductive"], metrics["lrcr.deductive"]) == pytest.approx(
        (2, 0.7, 0.5))
    assert metrics["opi_1.fuzzy"] == pytest.approx(2 * 0.4 * 0.5 / 0.9)  # 0.4444
    assert not any(key.endswith(".temporal") for key in metrics)


def test_intervals_hold_their_estimates():
    metrics, _ = metrics_of(four_rows())
    for name in ("bertsim", "lrcr", "opi_1"):
        assert metrics[f"{name}_ci_low"] <= metrics[name] <= metrics[f"{name}_ci_high"], name
    # BERTSim resampled within each relation: deductive draws average 0.5, 0.7 or 0.9, fuzzy 0.2, 0.4 or 0.6;
    # the lowest possible mean is (0.5 + 0.2) / 2 = 0.35, the highest (0.9 + 0.6) / 2 = 0.75
    assert 0.35 <= metrics["bertsim_ci_low"] < 0.55 < metrics["bertsim_ci_high"] <= 0.75


def test_means_of_diagnostics_and_answer_scores_leave_missing_values_out():
    rows = four_rows(retrieved_sentences=[2, 4, 6, 8], retrieved_words=[10, 10, 40, 40],
                     support_recall=pd.array([1.0, None, 0.5, 0.0], dtype="Float64"),
                     judge_score=pd.array([7, 3, None, None], dtype="Float64"),
                     correctness=pd.array([None] * 4, dtype="Float64"))
    metrics, _ = metrics_of(rows)
    assert metrics["retrieved_sentences_mean"] == 5.0 and metrics["retrieved_words_mean"] == 25.0
    assert metrics["support_recall"] == pytest.approx(0.5)  # (1.0 + 0.5 + 0.0) / 3: the missing one left out
    assert metrics["judge_mean"] == 5.0  # (7 + 3) / 2
    assert "correctness" not in metrics and "answer_found" not in metrics  # nothing to average: absent, not NaN
    assert means(rows) == {k: metrics[k] for k in ("retrieved_sentences_mean", "retrieved_words_mean",
                                                   "support_recall", "judge_mean")}


def test_lrcr_of_the_question_alone():
    rows = four_rows(predicted_relation_question_only=["deductive", "deductive", "deductive", "fuzzy"])
    metrics, _ = metrics_of(rows)
    assert metrics["lrcr_question_only"] == pytest.approx(3 / 4)  # e1, e2 and e4 named from the question alone
    assert "lrcr_question_only" not in metrics_of(four_rows())[0]


def test_rows_without_gold_relations_get_bertsim_and_no_lrcr_or_opi():
    rows = four_rows(retrieved_sentences=[2, 4, 6, 8]).assign(relation=None)
    assert not has_gold_relations(rows)
    metrics, table = metrics_of(rows)
    assert set(metrics) == {"bertsim", "n_examples", "bertsim_ci_low", "bertsim_ci_high", "retrieved_sentences_mean"}
    assert metrics["bertsim"] == pytest.approx(0.55) and metrics["n_examples"] == 4
    assert metrics["bertsim_ci_low"] <= 0.55 <= metrics["bertsim_ci_high"]
    assert table.empty and list(table.columns) == ["relation", "n", "bertsim"]


def partly_labelled():
    """four_rows and a fifth row whose gold relation is unknown (similarity 0.8)."""
    fifth = pd.DataFrame({"id": ["e5"], "relation": [None], "predicted_relation": ["deductive"],
                          "similarity": [0.8]})
    return pd.concat([four_rows(), fifth], ignore_index=True)


def test_rows_missing_some_gold_relations_get_lrcr_and_opi_over_the_others():
    metrics, _ = metrics_of(partly_labelled())
    assert metrics["bertsim"] == pytest.approx(0.6)  # (0.9 + 0.5 + 0.6 + 0.2 + 0.8) / 5: every row
    assert metrics["lrcr"] == pytest.approx(0.5) and metrics["opi_1"] == pytest.approx(0.55 / 1.05)  # the four
    assert metrics["n_examples"] == 5 and metrics["gold_relations_missing"] == 1


def test_with_some_gold_relations_missing_the_bertsim_interval_holds_the_bertsim():
    rows = partly_labelled().assign(similarity=[0.9, 0.9, 0.9, 0.9, 0.1])  # labelled rows 0.9; all rows 0.74
    metrics, _ = metrics_of(rows)
    assert metrics["bertsim"] == pytest.approx(0.74)
    assert metrics["bertsim_ci_low"] <= metrics["bertsim"] <= metrics["bertsim_ci_high"]  # reported: [0.9, 0.9]


def test_usage_totals_add_cost_and_tokens_over_every_llm_use():
    usage = {"reader_cost_usd": 0.5, "relations_cost_usd": 0.25, "reader_prompt_tokens": 100.0,
             "reader_completion_tokens": 20.0, "judge_prompt_tokens": 5.0, "reader_calls": 3.0}
    assert usage_totals(usage) == {"llm_cost_usd": 0.75, "llm_tokens": 125.0}  # calls are no tokens
    assert usage_totals({}) == {}


def test_examples_without_an_answer_are_left_out_of_every_score_and_counted():
    frame = pd.DataFrame({"id": ["a", "b", "c"], "relation": ["causal", "causal", "temporal"],
                          "predicted_relation": ["causal", None, "temporal"], "similarity": [0.8, float("nan"), 0.6],
                          "generated_answer": ["x", None, "y"]})
    metrics, _ = configuration_metrics(frame, ["causal", "temporal"], [1.0], 1.0, resamples=200)
    # over a and c: BERTSim (0.8 + 0.6) / 2 = 0.7, LRCR 2 / 2 = 1.0
    assert metrics["bertsim"] == pytest.approx(0.7) and metrics["lrcr"] == 1.0
    assert metrics["answers_missing"] == 1.0 and metrics["n_examples"] == 2.0


def test_retrieval_metrics_are_averaged_over_the_examples_with_evidence():
    rows = four_rows(recall_at_4=pd.array([1.0, None, 0.5, 0.0], dtype="Float64"),
                     ndcg_at_4=pd.array([1.0, None, 0.25, 0.0], dtype="Float64"),
                     mrr=pd.array([1.0, None, 0.5, 0.0], dtype="Float64"))
    metrics, _ = metrics_of(rows)
    assert metrics["retrieval_examples"] == 3  # e2 had no evidence in a chunk
    assert metrics["recall_at_4"] == pytest.approx(0.5)  # (1.0 + 0.5 + 0.0) / 3
    assert metrics["ndcg_at_4"] == pytest.approx(1.25 / 3) and metrics["mrr"] == pytest.approx(0.5)
    for name in ("recall_at_4", "ndcg_at_4", "mrr"):
        assert metrics[f"{name}_ci_low"] <= metrics[name] <= metrics[f"{name}_ci_high"], name
    without, _ = metrics_of(four_rows())
    assert {k: v for k, v in metrics.items() if not k.startswith(("recall_at", "ndcg_at", "mrr", "retrieval_"))
            } == without  # the other metrics do not change
    unlabelled, _ = metrics_of(rows.assign(relation=None))
    assert unlabelled["mrr"] == pytest.approx(0.5) and unlabelled["retrieval_examples"] == 3


def test_examples_left_out_for_evidence_longer_than_a_chunk_are_counted():
    rows = four_rows(mrr=pd.array([1.0, None, None, 0.0], dtype="Float64"),
                     evidence_longer_than_chunk=pd.array([None, 1.0, 1.0, None], dtype="Float64"))
    metrics, _ = metrics_of(rows)
    assert metrics["retrieval_examples"] == 2 and metrics["retrieval_evidence_too_long"] == 2
    assert "retrieval_evidence_too_long" not in metrics_of(four_rows(mrr=pd.array([1.0, None, 0.5, 0.0],
                                                                                  dtype="Float64")))[0]
    nowhere, _ = metrics_of(four_rows(evidence_longer_than_chunk=pd.array([1.0] * 4, dtype="Float64")))
    assert "retrieval_examples" not in nowhere and nowhere["retrieval_evidence_too_long"] == 4  # no metric at all


def test_a_reused_result_spent_nothing_and_its_calls_are_cache_hits():
    computed = {"llm_answer_calls": 10.0, "llm_answer_cache_hits": 2.0, "llm_answer_http_requests": 9.0,
                "llm_answer_retries": 1.0, "llm_answer_prompt_tokens": 800.0, "llm_answer_completion_tokens": 90.0,
                "llm_answer_cost_usd": 0.02, "llm_answer_empty_replies": 1.0, "llm_classify_calls": 4.0,
                "llm_classify_cache_hits": 0.0, "llm_classify_http_requests": 4.0, "llm_classify_cost_usd": 0.01,
                "llm_cost_usd": 0.03, "llm_tokens": 890.0, "bertsim": 0.5, "support_calls": 3.0}
    reused = as_reused(computed)
    assert reused == {**computed, "llm_answer_cache_hits": 10.0, "llm_answer_http_requests": 0.0,
                      "llm_answer_retries": 0.0, "llm_answer_prompt_tokens": 0.0, "llm_answer_completion_tokens": 0.0,
                      "llm_answer_cost_usd": 0.0, "llm_classify_cache_hits": 4.0, "llm_classify_http_requests": 0.0,
                      "llm_classify_cost_usd": 0.0, "llm_cost_usd": 0.0, "llm_tokens": 0.0}
    # what the answers were (an empty reply stays counted), the scores, and a count that is no LLM use: unchanged
    assert reused["llm_answer_empty_replies"] == 1.0 and reused["bertsim"] == 0.5 and reused["support_calls"] == 3.0
    assert computed["llm_answer_http_requests"] == 9.0  # the kept result itself is not changed
    assert as_reused({"bertsim": 0.5}) == {"bertsim": 0.5}
