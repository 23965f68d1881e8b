"""The report's tables as people read them: each cell a string, a value with its interval in one cell
(``0.285 [0.244, 0.324]``), three decimals, p-values to three significant digits, "—" for what is missing (never
NaN), configurations by their short names; and the same tables as Markdown (every ``|`` in a cell escaped, so
MLflow's preview keeps each number under its header) and as HTML."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import pandas as pd

from opi.report.base import PERFECT, display

MISSING = "—"
DIAGNOSTICS = {"lrcr_question_only": "LRCR question only", "retrieved_sentences_mean": "sentences",
               "retrieved_words_mean": "words", "support_recall": "support recall", "answer_found": "answer found",
               "evidence_hit": "evidence hit", "right_article": "right article"}


def missing(value) -> bool:
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def number(value) -> str:
    return MISSING if missing(value) else f"{float(value):.3f}"


def interval(value, low, high) -> str:
    """``0.285 [0.244, 0.324]``; the value alone without an interval; "—" without a value."""
    if missing(value):
        return MISSING
    return number(value) if missing(low) or missing(high) else f"{value:.3f} [{low:.3f}, {high:.3f}]"


def share(value, low=None, high=None) -> str:
    """A share as a percentage with its interval: ``53 % [41 %, 66 %]``."""
    if missing(value):
        return MISSING
    return f"{value:.0%}" if missing(low) or missing(high) else f"{value:.0%} [{low:.0%}, {high:.0%}]"


def p_value(value) -> str:
    """Three significant digits, never in exponent notation (0.000123); "—" for no test."""
    return MISSING if missing(value) else np.format_float_positional(float(value), precision=3, fractional=False,
                                                                     trim="-")


def text(value) -> str:
    return MISSING if missing(value) else str(value)


def with_interval(frame: pd.DataFrame, metric: str) -> list[str]:
    """A metric's column with its interval in each cell."""
    return [interval(v, lo, hi) for v, lo, hi in zip(frame[metric], frame[f"{metric}_ci_low"],
                                                        frame[f"{metric}_ci_high"])]


def ranking(overall: pd.DataFrame, labels: dict[str, str], metrics: Sequence[str]) -> pd.DataFrame:
    """Configurations ranked: each headline metric with its interval, the adjusted p against the best and the
    verdict, and the share of the bounds' gap closed where the sweep has both bounds."""
    shown = {"#": [str(i + 1) for i in range(len(overall))],
             "configuration": [labels.get(c, c) for c in overall["configuration"]]}
    shown.update({display(m): with_interval(overall, m) for m in metrics})
    shown["p (adj.)"] = [MISSING if v == "best" else p_value(p) for p, v in zip(overall["p_adjusted"],
                                                                                overall["verdict"])]
    shown["vs best"] = overall["verdict"].map(text).tolist()
    if "gap_closed" in overall:
        shown["gap closed"] = [share(*values) for values in
                               zip(overall["gap_closed"], overall["gap_closed_ci_low"], overall["gap_closed_ci_high"])]
    return pd.DataFrame(shown)


def bounds(overall: pd.DataFrame, labels: dict[str, str], metrics: Sequence[str]) -> pd.DataFrame:
    """The random (lower) and oracle (upper) bounds: their values and how they stand against the best."""
    rows = overall[overall["kind"] == "bound"]
    shown = {"configuration": [labels.get(c, c) for c in rows["configuration"]],
             "bound": [f"{b} bound" for b in rows["bound"]]}
    shown.update({display(m): with_interval(rows, m) for m in metrics})
    shown["p (adj.)"] = [p_value(p) for p in rows["p_adjusted"]]
    shown["vs best"] = rows["verdict"].map(text).tolist()
    return pd.DataFrame(shown)


def retrieval(table: pd.DataFrame, labels: dict[str, str], ndcg: str | None) -> pd.DataFrame:
    """Ranking metrics with intervals (nDCG, MRR), recall at each k as values (their intervals in the csv), the
    adjusted p of nDCG and MRR against the best and one verdict; the oracle's values are not shown: it ranks from
    the gold evidence itself."""
    table = pd.concat([table[table["bound"].isna()], table[table["bound"].notna()]])  # the bounds last
    oracle = (table["note"] == PERFECT).to_numpy()
    shown = {"configuration": [labels.get(c, c) for c in table["configuration"]], "n": table["n"].map(str).tolist()}
    for metric in [ndcg, "mrr"] if ndcg else []:
        shown[display(metric)] = [MISSING if o else cell for o, cell in zip(oracle, with_interval(table, metric))]
    for metric in [c for c in table.columns if c.startswith("recall_at_") and not c.endswith(("_low", "_high"))]:
        shown[display(metric)] = [MISSING if o else number(v) for o, v in zip(oracle, table[metric])]
    if ndcg:
        shown[f"p {display(ndcg)}"] = [p_value(p) for p in table["ndcg_p_adjusted"]]
        shown["p MRR"] = [p_value(p) for p in table["mrr_p_adjusted"]]
    shown["vs best"] = [retrieval_verdict(*values) for values in
                        zip(table["ndcg_verdict"], table["mrr_verdict"], table["note"])]
    return pd.DataFrame(shown)


def retrieval_verdict(ndcg: str | None, mrr: str | None, note: str | None) -> str:
    """One verdict from nDCG's and MRR's ("lower on MRR only" where they part), or the note of a configuration
    that is not compared."""
    if not missing(note):
        return note
    if missing(ndcg):
        return MISSING
    if ndcg == mrr or missing(mrr):
        return ndcg
    if "not distinguishable" in (ndcg, mrr):
        return f"{mrr} on MRR only" if ndcg == "not distinguishable" else f"{ndcg} on nDCG only"
    return f"nDCG {ndcg}, MRR {mrr}"


def strengths(table: pd.DataFrame, labels: dict[str, str], key: str) -> pd.DataFrame:
    """Per relation: the best contender, how many others are as good, its value, the runner-up, the margin and the
    adjusted p."""
    name = lambda c: MISSING if missing(c) else labels.get(c, c)  # noqa: E731
    column = lambda c: table[c] if c in table else [None] * len(table)  # noqa: E731
    return pd.DataFrame({"relation": table["relation"], "n": table["n"].map(str), "best": table["best"].map(name),
                         "tied": [MISSING if missing(t) else str(int(t)) for t in column("tied")],  # others as good
                         display(key): table[key].map(number), "runner-up": list(map(name, column("runner_up"))),
                         "margin": list(map(number, column("margin"))),
                         "p (adj.)": list(map(p_value, column("p_adjusted"))),
                         "verdict": list(map(text, column("verdict")))})


def per_relation(table: pd.DataFrame, labels: dict[str, str], configurations: Sequence[str]) -> pd.DataFrame:
    """relation x configuration (contenders only), three decimals."""
    shown = table[list(configurations)].rename(columns=lambda c: labels.get(c, c))
    return shown.apply(lambda values: values.map(number)).rename_axis(None).reset_index(names="relation")


def plain(table: pd.DataFrame, labels: dict[str, str], names: dict[str, str] | None = None) -> pd.DataFrame:
    """Any table of numbers as shown: configurations by label, three decimals (ranks and counts as integers),
    columns renamed by ``names`` or ``display``."""
    shown = {}
    for column in table.columns:
        values = table[column]
        if column == "configuration":
            shown[column] = values.map(lambda c: labels.get(c, c))
        elif column.endswith("_rank") or column in ("labels_used", "n"):
            shown[rank_name(column)] = values.map(lambda v: MISSING if missing(v) else str(int(v)))
        else:
            shown[(names or {}).get(column, display(column))] = values.map(
                lambda v: number(v) if isinstance(v, (int, float, np.number)) or missing(v) else str(v))
    return pd.DataFrame(shown)


def rank_name(column: str) -> str:
    """bertsim_rank -> BERTSim rank; labels_used -> labels used."""
    if column.endswith("_rank"):
        return display(column.removesuffix("_rank").removesuffix("_mean")) + " rank"
    return column.replace("_", " ")


def diagnostics(overall: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """The retrieval diagnostics' means per configuration (bounds included), where the runs have them."""
    columns = [c for c in DIAGNOSTICS if c in overall]
    return plain(overall[["configuration", *columns]], labels, DIAGNOSTICS) if columns else pd.DataFrame()


def escape(cell: str) -> str:
    """A cell as Markdown keeps it inside its column: ``|`` escaped, no line break."""
    return str(cell).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


TEXT_COLUMNS = {"#", "configuration", "relation", "best", "runner-up", "bound", "vs best", "verdict"}


def markdown_table(table: pd.DataFrame) -> str:
    """A Markdown pipe table of string cells, every ``|`` in a cell escaped; names and verdicts left-aligned,
    numbers right-aligned."""
    header = [escape(c) for c in table.columns]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(":---" if c in TEXT_COLUMNS else "---:" for c in table.columns) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def html_table(table: pd.DataFrame) -> str:
    align = ["left" if c in TEXT_COLUMNS else "right" for c in table.columns]
    head = "".join(f"<th class='{a}'>{html.escape(str(c))}</th>" for a, c in zip(align, table.columns))
    body = "".join("<tr>" + "".join(f"<td class='{a}'>{html.escape(str(cell))}</td>" for a, cell in zip(align, row))
                   + "</tr>" for row in table.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
