"""Every float setting needs a range, as a user meets it in ``opi-eval``: NaN and infinity (which BM25 took silently
and made an SVM crash) end the run at compose time, in one line naming the setting and its range, exit 2 (every field
of every class: ``tests/opi/test_float_ranges.py``)."""
import pytest

from tests.helpers.cli import run_cli

CASES = [
    (["retriever=bm25", "retriever.k1=nan"],
     "invalid configuration: retriever: BM25Retriever: k1 must be a finite number >= 0, got nan"),
    pytest.param(["retriever=svm", "retriever.C=inf"],
                 "invalid configuration: retriever: SVMRetriever: C must be a finite number > 0, got inf",
                 marks=pytest.mark.slow),
    pytest.param(["setup=a_four", "retrievers.mmr.lambda_mult=nan"], "invalid configuration: retrievers.mmr: "
                 "MMRRetriever: lambda_mult must be a finite number in [0, 1], got nan", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("overrides, expected", CASES)
def test_a_float_setting_that_is_not_a_finite_number_ends_the_run_in_one_line(tmp_path, overrides, expected):
    output = run_cli("flows.cli.evaluate", tmp_path, *overrides, expect=2)
    assert output.strip().splitlines()[-1].endswith(expected), output[-3000:]
    assert "Traceback" not in output
    assert not (tmp_path / "cache").exists() and not (tmp_path / "mlflow.db").exists()
