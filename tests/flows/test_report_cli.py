"""opi-report refuses a sweep id it cannot use with one line naming it, before any report work."""
import logging

import mlflow
import pytest

from flows import report


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
