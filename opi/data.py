"""Datasets: one ``Example`` schema, loaders for the bundled set, RAG-Dataset-12000, generic tables and SQuAD JSON,
validation before any work, and the paper's balanced RAG-QA-1300 split.

Every loader ends in ``validate``: a bad row raises one ``DataError`` naming the file, row and field (or, with
``on_invalid="skip"``, is dropped and counted in a ``LoadReport``). Nothing downstream sees an empty field.
"""
from __future__ import annotations

import json
import numbers
import random
import re
import unicodedata
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from opi.schemas import DatasetConfig

REQUIRED = ("context", "question", "answer")
# a "question" longer than its context and than this looks like an article: the columns are likely swapped (a short
# question on a tiny context is not refused)
SWAPPED_QUESTION_WORDS = 40


class DataError(ValueError):
    """A dataset problem a user can fix: the message names the file, row and field."""


@dataclass(frozen=True)
class Example:
    id: str
    context: str
    question: str
    answer: str
    relation: str | None = None
    evidence: tuple[str, ...] = ()  # gold supporting text (sentences or answer spans) where the source has it
    article_id: str | None = None
    group: str | None = None  # dataset.group's value: the cluster of the report's inference, if not the article

    @property
    def cluster(self) -> str:
        """The unit whose questions share their fate (the report's intervals and tests resample whole clusters):
        ``dataset.group``'s value, else the article (its id, else its text's address)."""
        from opi.chunking import document_id

        return self.group or self.article_id or document_id(self.context)


@dataclass
class LoadReport:
    source: str
    rows_read: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> count
    notes: list[str] = field(default_factory=list)  # what a user should know that stops nothing, a line each

    @property
    def rows_kept(self) -> int:
        return self.rows_read - sum(self.dropped.values())

    def describe(self) -> str:
        reasons = ", ".join(f"{n} {why}" for why, n in self.dropped.most_common()) or "none"
        return f"{self.source}: {self.rows_read} rows read, {self.rows_kept} kept, dropped: {reasons}"


SKIP_HINT = " (or set dataset.on_invalid=skip to drop such rows and report them)"


def _fail_or_skip(message: str, reason: str, on_invalid: str, report: LoadReport) -> None:
    if on_invalid == "error":
        raise DataError(message + SKIP_HINT)
    report.dropped[reason] += 1


def validate(records: Iterable[dict[str, Any]], source: str, relations: Sequence[str] | None = None,
             on_invalid: str = "error", evidence_separator: str | None = None,
             max_context_words: int = DatasetConfig.max_context_words, places: Sequence[str] | None = None
             ) -> tuple[list[Example], LoadReport]:
    """Turn raw records into Examples, checking fields, labels, ids and sizes. ``places`` says where each record is
    in its file (``row 8``, ``question 4``), else rows count from 1; an example without an id is known by its count
    from 1 either way. A row without a relation label keeps ``relation=None`` (where gold relations come from is
    the run's choice)."""
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid must be 'error' or 'skip', got {on_invalid!r}")
    report = LoadReport(source)
    examples: list[Example] = []
    seen: dict[str, str] = {}
    records = list(records)
    with_ids = any(not _blank(r.get("id")) for r in records)  # else every row is known by its number
    for row_number, record in enumerate(records, start=1):
        report.rows_read += 1
        place = places[row_number - 1] if places else f"row {row_number}"
        where = f"{source}, {place}"
        missing = [f for f in REQUIRED if f not in record]
        if missing:
            raise DataError(f"{where}: missing field(s) {missing}; the loader expects {list(REQUIRED)}, it has "
                            f"{sorted(record)} ({_separator_hint(record)})")
        problem, fields = None, {name: _field_text(record[name]) for name in REQUIRED}
        for name, value in fields.items():
            if not isinstance(value, str) or _no_text(value):
                problem = (f"{where}, field {name!r}: empty or not text ({value!r:.40})", f"empty {name}")
                break
        if problem is None:
            context_words, question_words = len(fields["context"].split()), len(fields["question"].split())
            if context_words > max_context_words:
                problem = (f"{where}, field 'context': {context_words:,} words, more than "
                           f"dataset.max_context_words ({max_context_words:,}); split the article into several rows "
                           f"or raise the limit", "context too long")
            elif question_words > max(context_words, SWAPPED_QUESTION_WORDS):
                problem = (f"{where}, field 'question': {question_words} words, longer than its context "
                           f"({context_words}); are the columns swapped? (map them with dataset.columns)",
                           "question longer than context")
        relation = None if _blank(record.get("relation")) else str(record["relation"])  # an empty cell: no label
        evidence, evidence_problem = _evidence(record.get("evidence"), evidence_separator)
        if problem is None and evidence_problem:
            problem = (f"{where}, field 'evidence': {evidence_problem}", "unreadable evidence")
        if problem is None and record.get(NOT_LABELLED):
            problem = (f"{where}: the label file has no label for it", "not in the label file")
        if problem is None and relation is not None and relations is not None and relation not in relations:
            problem = (f"{where}, field 'relation': unknown label {relation!r}; known: {list(relations)}",
                       "unknown relation")
        example_id = str(row_number) if _blank(record.get("id")) else id_text(record["id"])
        if problem is None and with_ids and _blank(record.get("id")):
            problem = (f"{where}, field 'id': missing, where other rows have one (give every row an id, or none)",
                       "missing id")
        if problem is None and example_id in seen:
            problem = (f"{where}, field 'id': duplicate id {example_id!r} (first at {seen[example_id]})",
                       "duplicate id")
        if problem is not None:
            _fail_or_skip(*problem, on_invalid, report)
            continue
        seen[example_id] = place
        examples.append(Example(example_id, fields["context"], fields["question"], fields["answer"],
                                relation, evidence, _text(record.get("article_id")), _text(record.get("group"))))
    if not examples:
        raise DataError(f"{source}: no usable rows ({report.describe()})")
    return examples, report


def _field_text(value: Any) -> Any:
    """A number (JSON's or parquet's 42) as its text, as a CSV cell reads; anything else (bool, NaN) as it is."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and not _is_missing(value):
        return id_text(value)
    return value


def _text(value: Any) -> str | None:
    """An optional label as text (an id column read as numbers: 3.0 -> "3", as ``id_text``); None when blank."""
    return None if _blank(value) else id_text(value)


_INTEGRAL_TEXT = re.compile(r"[+-]?[0-9]+\.0+")


def id_text(value: Any) -> str:
    """An id as text, the one rule wherever ids are compared (the data, label files, sheets): stripped, and an
    integral number is the integer's text, whether it was read as a number or as text -- ``1``, ``1.0``, ``"1.0"``
    are all ``"1"`` (a column of ids pandas or a spreadsheet read as floats matches the data's). Anything else is
    its text as it is (``"1.5"``, ``"a01"``, ``"007"``)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if number.is_integer():
            return str(int(value)) if isinstance(value, numbers.Integral) else str(int(number))
    text = str(value).strip()
    if _INTEGRAL_TEXT.fullmatch(text):
        return text.split(".")[0]
    return text


def _blank(value: Any) -> bool:
    """No value: None, a missing cell (NaN), or no visible text."""
    return value is None or _is_missing(value) or _no_text(str(value))


def _no_text(text: str) -> bool:
    """Only whitespace and invisible format characters (a zero-width space, a byte-order mark, a soft hyphen):
    ``str.strip`` keeps the latter, so a cell pasted with one would pass for text."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


class _DoubledKeys(ValueError):
    pass


def _object_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (``json`` keeps the last of two silently)."""
    counts = Counter(key for key, _ in pairs)
    doubled = sorted(key for key, count in counts.items() if count > 1)
    if doubled:
        raise _DoubledKeys(doubled)
    return dict(pairs)


def _doubled_header(text: str) -> list[str]:
    """Column names a CSV's header gives more than once (pandas would read the second ``answer`` as ``answer.1``)."""
    import csv
    import io

    try:  # the header pandas reads: blank lines before it skipped, a byte-order mark not part of its first name
        header = next((row for row in csv.reader(io.StringIO(text.removeprefix("\ufeff"))) if row), [])
    except csv.Error:
        return []  # an unreadable header: pandas says what is wrong with it
    counts = Counter(name.strip() for name in header if name.strip())
    return sorted(name for name, count in counts.items() if count > 1)


def _is_missing(value: Any) -> bool:
    try:
        return value != value  # NaN from a table's empty cell
    except (TypeError, ValueError):
        return False


def _evidence(value: Any, separator: str | None) -> tuple[tuple[str, ...], str | None]:
    """A row's gold evidence as a tuple of texts: a list (json, or parquet's arrays) item by item; a string is one
    piece, or several cut at ``separator``; never a string's characters. (evidence, problem)."""
    if value is None or (not isinstance(value, (str, list, tuple)) and not hasattr(value, "tolist")
                         and _is_missing(value)):
        return (), None
    if isinstance(value, str):
        pieces = value.split(separator) if separator else [value]
    elif hasattr(value, "tolist") or isinstance(value, (list, tuple)):
        pieces = value.tolist() if hasattr(value, "tolist") else list(value)
        if not all(isinstance(p, str) for p in pieces):
            return (), f"a list must hold text only, got {[type(p).__name__ for p in pieces][:3]}"
    else:
        return (), f"expected text or a list of texts, got {type(value).__name__}"
    return tuple(p.strip() for p in pieces if not _no_text(p)), None


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise DataError(f"{path}: not valid UTF-8 at byte {err.start} (line {line}); re-save the file as UTF-8") \
            from None
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a .jsonl, .json (list of objects), .csv or .parquet file as dicts."""
    return read_rows(path)[0]


def read_rows(path: str | Path) -> tuple[list[dict[str, Any]], list[str] | None]:
    """``read_table``'s rows and where each is in the file (``row 8``: a JSONL file's 8th record, with its line when
    blank lines make that another, ``row 8 (line 9)``; a CSV's 8th row under its header), or None when rows are simply
    counted from 1. Blank JSONL lines and all-empty CSV rows are no rows."""
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a data file; name one .jsonl, .json, .csv or .parquet file")
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if suffix == ".jsonl":
        rows, places = [], []
        # "\n" only: str.splitlines also splits at U+2028, U+0085, ..., which JSON strings may hold unescaped
        for number, line in enumerate(_read_text(path).split("\n"), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line, object_pairs_hook=_object_once))
                except json.JSONDecodeError as err:
                    raise DataError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
                except _DoubledKeys as err:
                    raise DataError(f"{path}, line {number}: key(s) {err.args[0]} given twice in one object; keep "
                                    "one of each") from None
                if not isinstance(rows[-1], dict):
                    raise DataError(f"{path}, line {number}: expected a JSON object (one example per line), got "
                                    f"{type(rows[-1]).__name__} {line.strip()[:40]}")
                # the record's count is what dataset.label_join=row counts; the line is what an editor shows
                places.append(f"row {len(rows)}" + (f" (line {number})" if number != len(rows) else ""))
        return rows, places
    if suffix == ".json":
        data = _read_json(path)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of objects (for SQuAD files use dataset=squad)")
        for number, item in enumerate(data, start=1):
            if not isinstance(item, dict):
                raise DataError(f"{path}, item {number}: expected a JSON object, got {type(item).__name__}")
        return data, None
    import pandas as pd

    if suffix not in (".csv", ".parquet"):
        raise DataError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json, .csv or .parquet")
    try:
        if suffix == ".csv":
            import io

            text = _read_text(path)
            doubled = _doubled_header(text)
            if doubled:
                raise DataError(f"{path}: column(s) {doubled} appear more than once in the header; keep one of each, "
                                "or rename the others")
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        else:
            frame = pd.read_parquet(path)
    except DataError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ValueError) as err:
        raise DataError(f"{path}: cannot be read as {suffix[1:]} "
                        f"({type(err).__name__}: {' '.join(str(err).split())[:160]})") from None
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    if suffix == ".parquet":
        return rows, None
    kept = [number for number, row in enumerate(rows) if not all(_blank(v) for v in row.values())]  # Excel's ",,,"
    return [rows[n] for n in kept], [f"row {n + 1}" for n in kept]


def rename_columns(rows: list[dict[str, Any]], columns: dict[str, str] | None, source: str,
                   setting: str = "dataset.columns") -> list[dict[str, Any]]:
    """Apply ``{our_field: their_column}``; a mapped column absent from the file is an error naming it."""
    if not columns:
        return rows
    if rows:
        absent = [theirs for theirs in columns.values() if theirs not in rows[0]]
        if absent:
            raise DataError(f"{source}: column(s) {absent} named in {setting} are not in the file; "
                            f"it has {sorted(rows[0])}")
    return [{**row, **{ours: row.get(theirs) for ours, theirs in columns.items()}} for row in rows]


def join_labels(rows: list[dict[str, Any]], labels_path: str | Path, join_on: str = "id",
                relations: Sequence[str] | None = None, source: str = "the data", on_invalid: str = "error"
                ) -> list[dict[str, Any]]:
    """Add ``relation`` from a label file (columns ``id`` or ``row``, and ``relation``), every row of it checked:
    a problem names the label file, its row and field. Every example of ``source`` needs a label; with
    ``on_invalid="skip"`` those it leaves out are marked (``NOT_LABELLED``) and dropped by ``validate``, counted
    (a sheet people labelled a sample of, ``opi-label import``)."""
    labels, places = read_rows(labels_path)
    if not labels or "relation" not in labels[0] or join_on not in labels[0]:
        raise DataError(f"{labels_path}: a label file needs columns {join_on!r} and 'relation'")
    by_key = label_keys(labels, labels_path, join_on, relations, places, blank_ok=on_invalid == "skip")
    if join_on == "id" and all(_blank(row.get("id")) for row in rows):
        raise DataError(f"{source} has no 'id' column to join the labels of {labels_path} on; join them by row "
                        "number with dataset.label_join=row")
    keys = [id_text(row.get("id")) if join_on == "id" else str(number) for number, row in enumerate(rows, start=1)]
    unmatched = [key for key in keys if key not in by_key]
    if len(unmatched) == len(keys):
        raise DataError(f"{labels_path}: no label matches any example by {join_on!r} (e.g. {keys[:3]}); "
                        f"check dataset.label_join")
    extra = set(by_key) - set(keys)
    if extra:
        raise DataError(f"{labels_path}: {len(extra)} label(s) name no example by {join_on!r}, "
                        f"e.g. {sorted(extra)[:3]}; the label file does not match this dataset")
    if unmatched and on_invalid == "error":
        raise DataError(f"{labels_path}: no label for {len(unmatched)} of the {len(keys)} examples of {source} by "
                        f"{join_on!r}, e.g. {unmatched[:3]}; a label file labels every example (or set "
                        f"dataset.on_invalid=skip to evaluate only the examples it labels)")
    return [{**row, "relation": by_key.get(key), **({NOT_LABELLED: True} if key not in by_key else {})}
            for row, key in zip(rows, keys)]


def relations_replaced(rows: list[dict[str, Any]], joined: list[dict[str, Any]], source: str,
                       labels_path: str | Path) -> str | None:
    """The line that says a label file replaced relations the data has of its own (None if it has none): how many
    of the rows it labels had one, and how many of those differ."""
    pairs = [(row.get("relation"), new["relation"]) for row, new in zip(rows, joined)
             if not _blank(row.get("relation")) and not new.get(NOT_LABELLED)]
    if not pairs:
        return None
    differ = sum(str(own).strip() != label for own, label in pairs)
    return (f"{source} has a 'relation' column of its own ({len(pairs)} labelled row{'s' * (len(pairs) != 1)}, "
            f"{differ} of them differently); the labels of {labels_path} replace it")


NOT_LABELLED = "_not_in_the_label_file"  # a row's mark: the label file leaves it out (dataset.on_invalid=skip)


def label_keys(labels: list[dict[str, Any]], path: str | Path, join_on: str, relations: Sequence[str] | None,
               places: Sequence[str] | None = None, blank_ok: bool = False) -> dict[str, str | None]:
    """Key -> relation of a label file's rows (where they are in the file as ``read_rows`` says, as the data's); a
    row with a blank relation is refused, or with ``blank_ok`` left out (its example is then not labelled)."""
    by_key: dict[str, str | None] = {}
    first: dict[str, str] = {}
    for number, label in enumerate(labels, start=1):
        place = places[number - 1] if places else f"row {number}"
        where, key, relation = f"{path}, {place}", label.get(join_on), label.get("relation")
        if _blank(key):
            raise DataError(f"{where}, field {join_on!r}: missing; every label names the example it labels")
        key = id_text(key)
        if key in first:
            raise DataError(f"{where}, field {join_on!r}: {key!r} is labelled twice (first at {first[key]}); "
                            "keep one label per example")
        if _blank(relation):
            if blank_ok:
                first[key] = place
                continue
            raise DataError(f"{where}, field 'relation': missing; label example {key!r}, or leave its row out and "
                            "set dataset.on_invalid=skip to evaluate only the labelled examples")
        relation = str(relation)
        if relations is not None and relation not in relations:
            raise DataError(f"{where}, field 'relation': unknown label {relation!r}; known: {list(relations)}")
        first[key], by_key[key] = place, relation
    return by_key


def bundled_path(name: str) -> Path:
    return Path(str(resources.files("opi") / "datasets" / name))


def load_bundled(name: str) -> list[dict[str, Any]]:
    folder = bundled_path(name)
    articles = {a["article_id"]: a for a in read_table(folder / "articles.jsonl")}
    return [{**q, "context": articles[q["article_id"]]["context"]} for q in read_table(folder / "examples.jsonl")]


def _squad_get(item: Any, key: str, path: str | Path, where: str, required: bool = True) -> Any:
    """``item[key]`` of a SQuAD file; a DataError names where in its structure (``data[0].paragraphs[1]``)."""
    if not isinstance(item, dict):
        raise DataError(f"{path}: {where} is {type(item).__name__}, not a JSON object")
    if required and key not in item:
        raise DataError(f"{path}: {where} has no {key!r}")
    return item.get(key)


def load_squad(path: str | Path) -> tuple[list[dict[str, Any]], list[str], int]:
    """SQuAD-format JSON: each article's paragraphs joined into one context; answer = first gold answer. Returns
    the rows, where each is in the file (``question 4``: the file's 4th question, answerable or not) and how many
    questions had no answer (SQuAD 2.0's unanswerable ones), which are left out."""
    data = _read_json(Path(path))
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: not SQuAD format (no top-level 'data' list)")
    rows, places, unanswerable, number = [], [], 0, 0
    for a_number, article in enumerate(data["data"]):
        at = f"data[{a_number}]"
        paragraphs = _squad_get(article, "paragraphs", path, at, required=False) or []
        texts = [_squad_get(p, "context", path, f"{at}.paragraphs[{n}]") for n, p in enumerate(paragraphs)]
        context = "\n\n".join(texts)
        for p_number, (paragraph, text) in enumerate(zip(paragraphs, texts)):
            for q_number, qa in enumerate(paragraph.get("qas") or []):
                where, number = f"{at}.paragraphs[{p_number}].qas[{q_number}]", number + 1
                answers = _squad_get(qa, "answers", path, where, required=False) or []
                if qa.get("is_impossible") or not answers:
                    unanswerable += 1
                    continue
                rows.append({"id": qa.get("id"), "context": context, "question": qa.get("question"),
                             "answer": _squad_get(answers[0], "text", path, f"{where}.answers[0]"),
                             "relation": qa.get("relation"), "evidence": [text],
                             "article_id": article.get("title", str(a_number))})
                places.append(f"question {number}")
    return rows, places, unanswerable


def load_hub(repo: str, split: str) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError as err:
        raise DataError("loading from the Hugging Face hub needs the hub extra (`pip install -e '.[hub]'` in OPI's "
                        "folder); or give dataset.path to a local parquet/jsonl/csv copy") from err
    try:
        return list(datasets.load_dataset(repo, split=split))
    except Exception as err:  # network or hub errors: say what to do instead
        raise DataError(f"could not load {repo!r} split {split!r} from the hub ({type(err).__name__}); offline, "
                        f"download it once and set dataset.path to the local parquet/jsonl/csv file") from err


def select(examples: list[Example], relations: Sequence[str] | None = None, sample: int | None = None,
           limit: int | None = None, seed: int = 0) -> list[Example]:
    """Filter by relation, take a seeded random sample, then cut to ``limit`` (in that order)."""
    if relations:
        present = Counter(e.relation for e in examples if e.relation is not None)
        absent = [r for r in relations if r not in present]
        if absent:  # a misspelt name would drop its examples without a word
            have = (f"the data's relations are {', '.join(f'{r} ({n})' for r, n in sorted(present.items()))}"
                    if present else "the data has no relation labels (give a label file: dataset.labels_path)")
            raise DataError(f"dataset.relations: no example has the relation {', '.join(map(repr, absent))}; {have}")
        examples = [e for e in examples if e.relation in set(relations)]
    if sample is not None and sample < len(examples):
        examples = random.Random(seed).sample(examples, sample)
    if limit is not None:
        examples = examples[:limit]
    if not examples:
        raise DataError("no examples left after the relations/sample/limit filters")
    return examples


def balanced_split(examples: Sequence[Example], per_relation: int = 100, test_fraction: float = 0.2,
                   seed: int = 0) -> tuple[list[Example], list[Example]]:
    """The paper's RAG-QA-1300 recipe: ``per_relation`` random examples of each relation, split train/test.

    A relation with fewer examples contributes all it has (with a warning). Deterministic for a seed.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    by_relation: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        if example.relation is None:
            raise DataError(f"balanced_split needs relation labels; example {example.id!r} has none")
        by_relation[example.relation].append(example)
    rng = random.Random(seed)
    train, test = [], []
    for relation in sorted(by_relation):
        group = sorted(by_relation[relation], key=lambda e: e.id)
        if len(group) < per_relation:
            warnings.warn(f"relation {relation!r} has {len(group)} examples, fewer than per_relation={per_relation}")
        chosen = rng.sample(group, min(per_relation, len(group)))
        n_test = round(len(chosen) * test_fraction)
        test.extend(chosen[:n_test])
        train.extend(chosen[n_test:])
    return train, test


def other_separator(header: str) -> str | None:
    """The separator a CSV's header line was saved with when it is not a comma (Excel's ';' in many locales), or
    None. Read with commas, such a file is one column named like ``context;question;answer``."""
    return next((s for s in (";", "\t", "|") if header.count(s) > header.count(",")), None)


def _separator_hint(record: dict) -> str:
    """What to do about a row without the columns: a CSV saved with another separator, or other column names."""
    separator = other_separator(",".join(map(str, record)))
    if separator:
        return (f"its header looks separated by {separator!r}, not commas: save the file as comma-separated CSV, "
                f"or as .jsonl or .parquet")
    return "map other column names with dataset.columns"


def load_examples(dataset: DatasetConfig | None = None, label_set: Sequence[str] | None = None, seed: int = 0,
                  filtered: bool = True) -> tuple[list[Example], LoadReport]:
    """Load, validate and (``filtered``) filter one dataset as ``conf/dataset/*.yaml`` describes it.

    ``dataset.kind``: ``bundled`` (package data ``name``; ``split`` all/train/test through ``balanced_split``),
    ``rag12000`` (``path`` to a local copy, else the hub's ``split``), ``table`` (jsonl/csv/parquet + ``columns``),
    ``squad`` (SQuAD JSON). ``label_set`` is the allowed labels; ``dataset.relations`` filters to some of them.
    Unfiltered, it is the whole source: the relation classifier's training pool.
    """
    d = dataset or DatasetConfig()
    unanswerable, places = 0, None
    if d.kind == "bundled":
        source, rows = f"bundled dataset {d.name}", load_bundled(d.name)
    elif d.kind == "rag12000":
        source = str(d.path) if d.path else f"{d.hub_repo} ({d.split})"
        rows, places = read_rows(d.path) if d.path else (load_hub(d.hub_repo, d.split), None)
    elif d.kind in ("table", "squad"):
        if not d.path:
            raise DataError(f"dataset kind {d.kind!r} needs dataset.path")
        source = str(d.path)
        rows, places, unanswerable = (*read_rows(d.path), 0) if d.kind == "table" else load_squad(d.path)
    else:
        raise DataError(f"unknown dataset kind {d.kind!r}; use bundled, rag12000, table or squad")
    if not rows:
        raise DataError(f"{source}: the dataset has zero rows" + (f" ({unanswerable} unanswerable questions left "
                                                                   "out)" if unanswerable else ""))
    rows = rename_columns(rows, d.columns.mapping(), source)
    if d.group:
        rows = rename_columns(rows, {"group": d.group}, source, "dataset.group")
    notes = []
    if d.labels_path:
        joined = join_labels(rows, d.labels_path, d.label_join, label_set, source, d.on_invalid)
        notes = [n for n in [relations_replaced(rows, joined, source, d.labels_path)] if n]
        rows = joined
    examples, report = validate(rows, source, label_set, d.on_invalid, d.evidence_separator, d.max_context_words,
                                places)
    report.notes += notes
    if unanswerable:
        report.rows_read += unanswerable
        report.dropped["unanswerable (no gold answer)"] += unanswerable
    if d.kind == "bundled" and d.split != "all":
        train, test = balanced_split(examples, d.split_per_relation, d.test_fraction, seed)
        examples = {"train": train, "test": test}.get(d.split)
        if examples is None:
            raise DataError(f"bundled dataset split must be all, train or test, got {d.split!r}")
    if not filtered:
        return examples, report
    return select(examples, d.relations, d.sample, d.limit, seed), report


def labelled(examples: Sequence[Example]) -> str:
    """``all``, ``none`` or ``some``: how many examples carry a relation label."""
    count = sum(e.relation is not None for e in examples)
    return "all" if count == len(examples) else "none" if count == 0 else "some"
