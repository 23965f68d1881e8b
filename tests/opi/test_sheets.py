import pytest

from opi.data import DataError
from opi.metrics.extrinsic import import_sheet
from opi.sheets import read_sheet, same_text


def test_a_filled_sheet_is_read_as_text_cells(tmp_path):
    (tmp_path / "s.csv").write_text("id,relation\n1,deductive\n2,\n")
    sheet = read_sheet(tmp_path / "s.csv", ["id", "relation"], "opi-label export")
    assert sheet.to_dict("records") == [{"id": "1", "relation": "deductive"}, {"id": "2", "relation": ""}]

    (tmp_path / "f.csv").write_text("id,relation\n1.0,deductive\n 2 ,\nq3,causal\n")  # ids a spreadsheet saved
    sheet = read_sheet(tmp_path / "f.csv", ["id", "relation"], "opi-label export")
    assert list(sheet["id"]) == ["1", "2", "q3"]  # as the data's ids are (opi.data.id_text)


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such file"),
    (lambda p: p.mkdir(), "a folder, not a sheet; name the .csv file opi-label export wrote"),
    (lambda p: p.write_text(""), "the file is empty; it should be the filled copy of the sheet opi-label export wrote"),
    (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00" * 50), "not text (not valid UTF-8)"),
    (lambda p: p.write_text("item,relation\nx,y\n"), "missing column(s) ['id'] (is this a sheet of opi-label export?"),
    # saved by a spreadsheet with semicolons: one column, or rows cut at the commas inside answers
    (lambda p: p.write_text("id;relation\n1;causal\n"), "it has ['id;relation']); its header is separated by ';', "
                                                       "not commas: save it as comma-separated CSV (UTF-8)"),
    (lambda p: p.write_text("id;relation;answer\n1;causal;yes\n2;causal;no, then yes, then, no\n"),
     "cannot be read as a CSV sheet (ParserError: Error tokenizing data. C error: Expected 1 fields in line 3, saw 4); "
     "its header is separated by ';', not commas"),
])
def test_whatever_is_not_a_sheet_is_one_line_naming_the_file(tmp_path, make, message):
    path = tmp_path / "sheet.csv"
    make(path)
    with pytest.raises(DataError) as err:
        read_sheet(path, ["id", "relation"], "opi-label export")
    assert str(err.value).startswith(str(path)) and message in str(err.value) and "\n" not in str(err.value)


def test_a_score_sheet_without_its_answers_cannot_be_matched_to_the_export(tmp_path):
    # another export's sheet with its generated_answer column deleted would be scored against this key
    (tmp_path / "s.csv").write_text("id,score\na,7\n")
    with pytest.raises(DataError, match=r"missing column\(s\) \['generated_answer'\]"):
        import_sheet(tmp_path / "s.csv", ["a"], answers={"a": "Paris."})
    assert import_sheet(tmp_path / "s.csv", ["a"])["score"].tolist() == [7]  # without a key: no answers to match


def test_an_answer_a_spreadsheet_respaced_is_still_the_one_exported(tmp_path):
    assert same_text("Paris, in 1850.\nThen Lyon.", " Paris,  in 1850.\r\nThen Lyon. ")
    assert not same_text("Paris, in 1850.", "Paris in 1850.")
    (tmp_path / "s.csv").write_text('id,score,generated_answer\na,7,"Paris.  "\n')
    assert import_sheet(tmp_path / "s.csv", ["a"], answers={"a": "Paris."})["score"].tolist() == [7]
