"""opi-label: a sheet out, people's labels back as a label file and a training file, agreement with the
classifier reported; a bad sheet is refused with its row and field named, before anything is written."""
import logging

import pandas as pd
import pytest

import flows.orchestration.tasks  # noqa: F401  (Prefect configures logging on import: before caplog attaches, not during a test)
from flows.cli.label import main
from flows.human.label import SHEET_COLUMNS
from tests.helpers.cli import run_cli
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "squad_like.jsonl"
ON_DATA = ["dataset=table", f"dataset.path={DATA}"]
# a person's labels for the fixture's eight questions
PEOPLE = {"sq1": "temporal", "sq2": "comparative", "sq3": "direct_matching", "sq4": "multi_hop",
          "sq5": "direct_matching", "sq6": "direct_matching", "sq7": "adversarial", "sq8": "deductive"}


@pytest.mark.slow
def test_export_label_import_and_use_the_labels(tmp_path, caplog):
    sheet_path = tmp_path / "sheet.csv"
    main(["export", "--n", "8", "--out", str(sheet_path), *ON_DATA])
    sheet = pd.read_csv(sheet_path, keep_default_na=False)
    assert list(sheet.columns) == SHEET_COLUMNS and set(sheet["id"]) == set(PEOPLE)
    assert (sheet["relation"] == "").all() and sheet["context_excerpt"].str.len().gt(20).all()
    excerpt = sheet.set_index("id").loc["sq7", "context_excerpt"]  # its evidence, given as a string in the file
    assert excerpt == "In 2009 an outbreak of enzootic bovine leukosis closed four farms; the guild answered by " \
                      "testing every herd twice a year."
    assert "`fuzzy`:" in sheet_path.with_suffix(".definitions.md").read_text()

    sheet["relation"] = sheet["id"].map(PEOPLE)
    sheet.to_csv(sheet_path, index=False)
    with caplog.at_level(logging.INFO, logger="opi"):
        main(["import", str(sheet_path), "--out", str(tmp_path / "labels.csv"), *ON_DATA,
                    "classifier.folds=2"])
    labels = pd.read_csv(tmp_path / "labels.csv")
    assert dict(zip(labels["id"], labels["relation"])) == PEOPLE
    train = pd.read_json(tmp_path / "labels.train.jsonl", lines=True)
    assert set(train.columns) >= {"context", "question", "answer", "relation"} and len(train) == 8
    agreement = [r.getMessage() for r in caplog.records if "agreement of the classifier" in r.getMessage()]
    assert len(agreement) == 1 and "Cohen's kappa" in agreement[0]
    assert f"8 labels of the 8 examples (dataset.labels_path={tmp_path / 'labels.csv'});" in caplog.text

    # the label file makes the data labelled; the training file lets the local classifier label unlabelled data
    log = run_cli("flows.cli.evaluate", tmp_path, *ON_DATA, f"dataset.labels_path={tmp_path}/labels.csv",
                  "classifier.folds=2", "report.enabled=false")
    assert "LRCR" in log and "no relation labels" not in log
    log = run_cli("flows.cli.evaluate", tmp_path, *ON_DATA, f"classifier.train_path={tmp_path}/labels.train.jsonl",
                  "report.enabled=false", cache="cache2")
    assert "the classifier local-clf labels each gold" in log and "LRCR" in log


@pytest.mark.parametrize("change, message", [
    ({"relation": "telepathic"}, "row 3, field 'relation': 'telepathic' is not one of"),
    ({"relation": ""}, "row 3, field 'relation': '' is not one of"),
    ({"id": "nope"}, "row 3, field 'id': 'nope' is not an example of this dataset"),
    ({"id": "sq1"}, "row 3, field 'id': 'sq1' labelled twice"),
])
def test_a_bad_sheet_names_its_row_and_writes_nothing(tmp_path, caplog, change, message):
    rows = [{"id": i, "relation": r} for i, r in PEOPLE.items()]
    rows[1].update(change)
    pd.DataFrame(rows).to_csv(tmp_path / "sheet.csv", index=False)
    with caplog.at_level(logging.ERROR, logger="opi"), pytest.raises(SystemExit) as stopped:
        main(["import", str(tmp_path / "sheet.csv"), *ON_DATA])
    assert stopped.value.code == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and message in errors[0]
    assert not (tmp_path / "sheet.labels.csv").exists()
