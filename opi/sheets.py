"""Reading a sheet people filled (relation labels, answer labels, 0-3-7 scores): every way a file can fail to be a
sheet is one ``DataError`` naming the file, before any row is read."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from opi.data import DataError, id_text, other_separator


def read_sheet(path: str | Path, columns: Sequence[str], made_by: str) -> pd.DataFrame:
    """The csv at ``path`` as text cells (blank = ""), with ``columns`` present; ``made_by`` is the command whose
    sheets these are, said when the file is not one. An ``id`` column's cells are ids as the data's are
    (``opi.data.id_text``: "1.0", as a spreadsheet may save an id, is "1")."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a sheet; name the .csv file {made_by} wrote")
    try:
        sheet = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty; it should be the filled copy of the sheet {made_by} "
                        "wrote") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not text (not valid UTF-8); save the sheet as CSV (UTF-8)") from None
    except (OSError, pd.errors.ParserError, ValueError) as err:
        raise DataError(f"{path}: cannot be read as a CSV sheet "
                        f"({type(err).__name__}: {' '.join(str(err).split())[:160]}){separator_said(path)}") from None
    missing = [column for column in columns if column not in sheet]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing} (is this a sheet of {made_by}? it has "
                        f"{list(sheet.columns)[:8]}){separator_said(path)}")
    if "id" in sheet:
        sheet["id"] = [id_text(value) if value.strip() else value for value in sheet["id"]]
    return sheet


def separator_said(path: Path) -> str:
    """A sheet saved with another separator than commas, said with what to do ("" when its header is not)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as file:
            separator = other_separator(file.readline())
    except OSError:
        return ""
    return (f"; its header is separated by {separator!r}, not commas: save it as comma-separated CSV (UTF-8)"
            if separator else "")


def same_text(exported: str, read: str) -> bool:
    """A sheet's cell is the text exported, whatever spaces and line ends a spreadsheet added or changed."""
    return exported.split() == read.split()
