"""opi-report refuses a sweep id it cannot use with one line naming it, before any report work."""
import logging

import mlflow
import pytest

from flows.cli import report
from flows.tracking.sweeps import children


def test_an_unknown_or_wrong_sweep_id_is_a_one_line_error(tmp_path, caplog):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("opi", artifact_location=str(tmp_path / "artifacts"))
    child = client.create_run(experiment, tags={"opi.role": "configuration"}).info.run_id
    for sweep, expected in [("0123456789abcdef0123456789abcdef", "is not in this MLflow store"),
                            (child, "is not a sweep's parent run (opi.role is 'configuration')")]:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="opi"), pytest.raises(SystemExit) as stopped:
            report.main(["--tracking-uri", uri, "--sweep", sweep])
        assert stopped.value.code == 2
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and errors[0].startswith(f"--sweep {sweep} {expected}")


@pytest.mark.slow
def test_opi_report_ranks_by_the_sweeps_beta_and_seed(tmp_path):
    from tests.helpers.cli import run_cli

    run_cli("flows.cli.evaluate", tmp_path, "experiment=smoke", "dataset.limit=3", "metrics.beta=2", "seed=3",
            "report.enabled=false")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    (sweep,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id], "tags.`opi.role` = 'sweep'")
    report.main(["--tracking-uri", uri, "--sweep", sweep.info.run_id, "--out", str(tmp_path / "report"),
                 "--resamples", "200", "--permutations", "99"])
    assert "Best by OPI-2" in (tmp_path / "report" / "report.md").read_text()
    overall = __import__("pandas").read_csv(tmp_path / "report" / "overall.csv")
    assert "opi_2" in overall and "opi_1" not in overall
    by_name = {run.info.run_name: run for run in children(client, sweep.info.run_id)}
    for row in overall.to_dict("records"):  # the same OPI-2 the run logged
        assert row["opi_2"] == pytest.approx(by_name[row["configuration"]].data.metrics["opi_2"])
    assert client.get_run(sweep.info.run_id).data.metrics["best_opi_2"] == pytest.approx(overall["opi_2"].max())


def test_bad_options_are_named_as_typed(capsys):
    for argv, said in [(["--seed", "-1"], "--seed must be a whole number >= 0, got -1"),
                       (["--alpha", "2"], "--alpha must be a finite number in (0, 1), got 2.0"),
                       (["--beta", "0"], "--beta must be")]:
        with pytest.raises(SystemExit) as stopped:
            report.parse_args(argv)
        assert stopped.value.code == 2 and said in capsys.readouterr().err, argv


def test_a_folder_it_cannot_write_or_a_sweep_without_results_is_one_line(tmp_path, caplog):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("opi", artifact_location=str(tmp_path / "artifacts"))
    sweep = client.create_run(experiment, tags={"opi.role": "sweep"}).info.run_id  # stopped before any result
    (tmp_path / "taken").write_text("a file")
    for extra, expected in [(["--out", str(tmp_path / "taken")], f"--out: {tmp_path / 'taken'} is a file"),
                            ([], f"sweep {sweep}: no configuration of it has results, so there is nothing to report")]:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="opi"), pytest.raises(SystemExit) as stopped:
            report.main(["--tracking-uri", uri, "--sweep", sweep, *extra])
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert stopped.value.code == 2 and len(errors) == 1 and expected in errors[0], errors
