"""The progress line of a sweep and the pointer to its runs in the MLflow UI."""
from urllib.parse import unquote

from omegaconf import OmegaConf

from flows.base import progress


def test_progress_counts_jobs_and_estimates_from_the_jobs_after_the_first(monkeypatch):
    clock = iter([100.0, 130.0, 134.0, 138.0, 142.0])  # start; the first job ends after 30 s, then one every 4 s
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(progress, "_SWEEP", {})
    progress.start_sweep(4)
    assert progress.finished_one() == "[1/4, 0:30 elapsed] "
    assert progress.finished_one() == "[2/4, 0:34 elapsed, about 0:08 left] "
    assert progress.finished_one() == "[3/4, 0:38 elapsed, about 0:04 left] "
    assert progress.finished_one() == "[4/4, 0:42 elapsed] "


def test_progress_without_a_total_counts_what_is_done(monkeypatch):
    clock = iter([100.0, 122.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(progress, "_SWEEP", {})
    progress.start_sweep(None)  # a race's jobs: how many is not known when it starts
    assert progress.finished_one() == "[1 done, 0:22 elapsed] "


def sweep(task: list[str], params: dict, grids: list | None = None):
    return OmegaConf.create({"hydra": {"overrides": {"task": task}, "sweeper": {"params": params, "grids": grids}}})


def test_the_planned_sweep_is_the_product_of_the_swept_options():
    assert progress.planned_sweep(sweep(["setup=knn,bm25,dps", "seed=0,1", "dataset.limit=3"], {})) == (6, None)
    assert progress.planned_sweep(sweep(["dataset.limit=3"], {"setup": "knn,bm25"})) == (2, None)
    assert progress.planned_sweep(sweep(["seed=range(0,3)"], {})) == (3, None)
    assert progress.planned_sweep(sweep(["retriever=glob(*)"], {})) == (None, None)  # glob needs Hydra's loader


def test_the_planned_sweep_of_a_union_of_grids_counts_each_grid_once():
    grids = [{"retriever": "knn,bm25", "retriever.k": "2,4"}, {"setup": "a_two,s_two"}]
    assert progress.planned_sweep(sweep(["seed=0,1"], {}, grids)) == (12, None)  # (4 + 2) x 2 seeds


def test_a_command_line_value_replacing_a_swept_one_is_counted_and_said():
    # experiment=smoke sweeps setup=knn,bm25; setup=a_four on the command line replaces it: one configuration
    size, note = progress.planned_sweep(sweep(["experiment=smoke", "setup=a_four"], {"setup": "knn,bm25"}))
    assert size == 1 and note == "setup=a_four replaces the sweep setup=knn,bm25"


def test_the_ui_pointer_opens_the_parents_children_on_a_local_store():
    text = progress.ui_pointer("sqlite:///mlruns/mlflow.db", "7", "abc123", 13)
    command, address, _, view, traces, _ = text.splitlines()
    assert view == ("every configuration charted, best first: http://127.0.0.1:5000/#/experiments/7/runs?"
                    "workflowType=machine_learning&viewStateShareKey=abc123")  # flows.tracking.sweep_report's view
    assert command == "open the MLflow UI with: mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db --port 5000"
    assert unquote(address) == ("then http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&"
                                "searchFilter=tags.mlflow.parentRunId = 'abc123'")
    assert traces == "per-example traces: http://127.0.0.1:5000/#/experiments/7/evaluation-runs?workflowType=genai"
    assert progress.ui_pointer("http://mlflow.internal:8080/", "7", "abc123", 13).startswith(
        "http://mlflow.internal:8080/#/experiments/7/runs?")
