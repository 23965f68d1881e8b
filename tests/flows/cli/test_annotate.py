"""opi-annotate on a real finished sweep: export the sheet, people fill it, import logs the meta-evaluation."""
import mlflow
import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from flows.cli.annotate import main


@pytest.fixture(scope="module")
def sweep(finished_sweep):
    folder, uri, parent, _ = finished_sweep
    client = mlflow.MlflowClient(uri)
    frames = []
    for run in client.search_runs([client.get_run(parent).info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parent}'"):
        path = client.download_artifacts(run.info.run_id, "predictions.parquet", str(folder))
        frames.append(pd.read_parquet(path).assign(configuration=run.info.run_name, run_id=run.info.run_id))
    mlflow.set_tracking_uri(uri)
    return folder, uri, parent, pd.concat(frames, ignore_index=True)


def annotate(uri, *args):
    main(["--tracking-uri", uri, *args])


@pytest.mark.slow
def test_export_import_logs_agreement_with_people(sweep):
    folder, uri, parent, predictions = sweep
    sheet_path = folder / "sheet.csv"
    annotate(uri, "export", "--out", str(sheet_path))
    sheet = pd.read_csv(sheet_path, dtype=str, keep_default_na=False)
    assert list(sheet.columns) == ["id", "question", "ground_truth", "generated_answer", "score"]
    distinct = predictions.drop_duplicates(["id", "generated_answer"])
    assert len(sheet) == len(distinct) and set(sheet["score"]) == {""}

    # the "annotators": 7 when the answer shares a word with the ground truth's first five, else 0
    def score(answer, truth):
        return 7 if set(truth.lower().split()[:5]) & set(answer.lower().split()) else 0
    sheet["score"] = [str(score(a, t)) for a, t in zip(sheet["generated_answer"], sheet["ground_truth"])]
    sheet.to_csv(sheet_path, index=False)
    annotate(uri, "import", str(sheet_path))

    people = np.array([score(a, t) for a, t in zip(predictions["generated_answer"], predictions["answer"])]) / 7
    bertsim = predictions["similarity"].to_numpy()
    run = mlflow.get_run(parent).data.metrics
    assert run["human_vs_bertsim_average_absolute_difference"] == pytest.approx(np.mean(np.abs(people - bertsim)))
    means = predictions.assign(people=people).groupby("configuration")[["people", "similarity"]].mean()
    expected = spearmanr(means["people"], means["similarity"]).statistic
    if np.isnan(expected):  # tied means: nothing to log
        assert "human_vs_bertsim_spearman" not in run
    else:
        assert run["human_vs_bertsim_spearman"] == pytest.approx(expected)
    for run_id, name in predictions[["run_id", "configuration"]].drop_duplicates().itertuples(index=False):
        assert mlflow.get_run(run_id).data.metrics["human_mean"] == pytest.approx(7 * means.loc[name, "people"])
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent, "meta_evaluation")}
    assert {f"meta_evaluation/{n}.csv" for n in ("agreement", "by_configuration", "places", "human_scores")} <= artifacts


def test_bad_sheet_is_named_and_nothing_is_logged(sweep, caplog):
    folder, uri, parent, _ = sweep
    sheet_path = folder / "bad.csv"
    annotate(uri, "export", "--out", str(sheet_path))
    sheet = pd.read_csv(sheet_path, dtype=str, keep_default_na=False).assign(score="7")
    sheet.loc[1, "score"] = "5"
    sheet.to_csv(sheet_path, index=False)
    before = mlflow.get_run(parent).data.metrics
    with pytest.raises(SystemExit) as exit_info:
        annotate(uri, "import", str(sheet_path))
    assert exit_info.value.code == 2
    assert f"{sheet_path}, row 3, field 'score': '5' is not one of 0, 3, 7" in caplog.text
    assert mlflow.get_run(parent).data.metrics == before


def test_the_sweep_options_go_before_or_after_the_subcommand(sweep):
    """opi-annotate took --sweep before its subcommand and opi-label answers after it: each takes it at both places
    (a parent run id that is not a sweep's is refused wherever it is given, so the option is read there)."""
    import logging

    import flows.human.answers  # noqa: F401 - Prefect sets logging up when imported: listen after it has
    from flows.cli.label import main as label

    records = []
    listener = logging.Handler()
    listener.emit = records.append
    logging.getLogger("opi").addHandler(listener)

    folder, uri, parent, _ = sweep
    child = mlflow.MlflowClient(uri).search_runs([mlflow.get_run(parent).info.experiment_id],
                                                 f"tags.mlflow.parentRunId = '{parent}'")[0].info.run_id
    commands = {
        "annotate before": lambda run, out: annotate(uri, "--sweep", run, "export", "--out", str(out)),
        "annotate after": lambda run, out: annotate(uri, "export", "--sweep", run, "--out", str(out)),
        "label before": lambda run, out: label(["--sweep", run, "--tracking-uri", uri, "answers", "export", "--n", "2",
                                                "--out", str(out)]),
        "label after": lambda run, out: label(["answers", "export", "--sweep", run, "--n", "2", "--out", str(out),
                                               "--tracking-uri", uri]),
    }
    sheets = {}
    try:
        for placement, command in commands.items():
            with pytest.raises(SystemExit) as exit_info:
                command(child, folder / "never.csv")
            assert exit_info.value.code == 2, placement
            assert f"--sweep {child} is not a sweep's parent run" in records[-1].getMessage(), placement
            command(parent, folder / f"{placement}.csv")
            sheets[placement] = (folder / f"{placement}.csv").read_text()
    finally:
        logging.getLogger("opi").removeHandler(listener)
    assert sheets["annotate before"] == sheets["annotate after"] and sheets["label before"] == sheets["label after"]
