"""The report as people read it: a header (what was compared, what every configuration shares, the unit of
inference), a verdict of a few short lines, then the tables and figures; as Markdown (MLflow's artifact preview,
the parent run's description) and as one self-contained HTML file (figures embedded as data URIs)."""
from __future__ import annotations

import base64
import html
import re
from typing import TYPE_CHECKING

import pandas as pd

from opi.report import tables
from opi.report.base import GOLD_SOURCES, SCOPES, display
from opi.report.statistics import retrieval_ndcg, tied_with

if TYPE_CHECKING:
    from opi.report.report import SweepReport

MAX_NAMED = 4  # more configurations than this in one verdict clause are counted, not named
FIGURES = {"bars.png": "Metrics with intervals", "heatmap.png": "OPI per relation"}
STYLE = ("body{font-family:system-ui,sans-serif;font-size:14px;margin:1.5em;max-width:1240px;color:#222}"
         "table{border-collapse:collapse;margin:.4em 0 1em}td,th{padding:.2em .5em;border-bottom:1px solid #ddd;"
         "white-space:nowrap}.left{text-align:left}.right{text-align:right}"
         "th{background:#f4f4f4}.caption{color:#555;font-size:13px;margin:.2em 0}img{max-width:100%}"
         "h2{font-size:18px;margin-top:1.4em}.header{color:#444}")


def label(report: SweepReport, configuration: str) -> str:
    return report.labels.get(configuration, configuration)


def names(report: SweepReport, configurations: list[str]) -> str:
    """Configurations by name, or by number when there are more than ``MAX_NAMED``."""
    if len(configurations) > MAX_NAMED:
        return f"{len(configurations)} configurations"
    return ", ".join(label(report, c) for c in configurations)


def header(report: SweepReport) -> list[str]:
    """What was compared and how: counts, the parts every configuration shares, the unit of inference."""
    s, o = report.settings, report.overall
    bounds = int((o["kind"] == "bound").sum())
    counted = plural(len(o) - bounds, "configuration") + (f" and {plural(bounds, 'bound')}" if bounds else "")
    scope = [f"retrieval: {'own article' if s.scope == 'article' else 'whole corpus'}"] if s.scope else []
    lines = [" · ".join([counted, *(f"{part}: {value}" for part, value in s.fixed), *scope])]
    if report.design is not None:
        d = report.design
        unit = "article" if d.unit == "article" else "question"
        said = " (the predictions name no article)" if s.config.unit == "article" and d.unit == "example" else ""
        lines.append(f"Inference by {unit}{said}: {d.describe()} · {s.config.confidence:.0%} bootstrap intervals · "
                     f"paired permutation tests, Benjamini-Hochberg adjusted, α = {s.config.alpha}")
        if d.warning:
            lines.append(f"**Warning**: {d.warning}.")
    if s.incomplete:
        lines.append(f"**Incomplete sweep**: {s.incomplete}.")
    if s.raced:
        lines.append(f"**Raced sweep**: {s.raced}.")
    return lines


def verdict(report: SweepReport) -> list[str]:
    """The decision, then one line per headline metric (the others, the bounds, retrieval)."""
    lines = [decision(report)]
    lines += [metric_line(report, m) for m in report.metrics if m != report.rank_by]
    lines += [line for line in (bounds_line(report), retrieval_line(report)) if line]
    return lines


def decision(report: SweepReport) -> str:
    o, key, best = report.overall, report.rank_by, report.best
    contenders = o[o["kind"] != "bound"]
    tied = [c for c in tied_with(contenders, key, best[key]) if c != best["configuration"]]
    text = (f"Best by {display(key)}: **{label(report, best['configuration'])}**"
            f"{f', tied with {names(report, tied)}' if tied else ''}, "
            f"{tables.interval(best[key], best[key + '_ci_low'], best[key + '_ci_high'])}.")
    if len(contenders) == 1:
        return text + (" It is the only configuration the race left." if report.settings.raced
                       else " It is the only configuration.")
    return text + " " + standing(report, contenders[contenders["verdict"] != "best"], "verdict")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def standing(report: SweepReport, others: pd.DataFrame, column: str) -> str:
    """The others against the best: "Not distinguishable from it: kNN, A-Two; lower: 10 configurations." """
    tied = others.loc[others[column] == "not distinguishable", "configuration"].tolist()
    lower = others.loc[others[column] == "lower", "configuration"].tolist()
    if not tied:
        return "Every other configuration is lower." if lower else ""
    said = "every other configuration" if len(tied) == len(others) > MAX_NAMED else names(report, tied)
    return f"Not distinguishable from it: {said}" + (f"; lower: {names(report, lower)}." if lower else ".")


def metric_line(report: SweepReport, metric: str) -> str:
    o = report.overall[report.overall["kind"] != "bound"]
    best = o.loc[o[metric].idxmax()]
    tied = tied_with(o, metric, best[metric])
    named = f"{names(report, tied)} (tied)" if len(tied) > 1 else label(report, best["configuration"])
    return (f"{display(metric)}: best {named}, "
            f"{tables.interval(best[metric], best[metric + '_ci_low'], best[metric + '_ci_high'])}.")


def bounds_line(report: SweepReport) -> str | None:
    o, key, best = report.overall, report.rank_by, report.best
    if "gap_closed" not in o:
        return None
    lower, upper = (o[o["bound"] == b].iloc[0] for b in ("lower", "upper"))
    return (f"Bounds: {label(report, lower['configuration'])} {tables.number(lower[key])}, "
            f"{label(report, upper['configuration'])} {tables.number(upper[key])}; "
            f"{label(report, best['configuration'])} closes "
            f"{tables.share(best['gap_closed'], best['gap_closed_ci_low'], best['gap_closed_ci_high'])} of the gap.")


def retrieval_line(report: SweepReport) -> str | None:
    """The best retrieval by nDCG among the contenders, and how the others stand against it on nDCG."""
    t = report.retrieval
    if t.empty or not (t["ndcg_verdict"] == "best").any():
        return None
    ndcg = retrieval_ndcg(t)
    best = t[t["ndcg_verdict"] == "best"].iloc[0]
    contenders = t[t["bound"].isna() & t["ndcg_p_adjusted"].notna()]
    text = (f"Retrieval by {display(ndcg)}: best {label(report, best['configuration'])}, "
            f"{tables.interval(best[ndcg], best[ndcg + '_ci_low'], best[ndcg + '_ci_high'])}.")
    return " ".join([text, standing(report, contenders, "ndcg_verdict")]).strip()


def notes(report: SweepReport) -> list[str]:
    s = report.settings
    lines = []
    if s.scope:
        lines.append(f"Retrieval: {SCOPES[s.scope]}.")
    if s.gold_source:
        lines.append(f"Gold relations: {GOLD_SOURCES[s.gold_source]}.")
    return lines


def sections(report: SweepReport) -> list[tuple[str, str, pd.DataFrame]]:
    """(title, caption, table as shown), in the report's order."""
    from opi.report.sections import every

    return every(report)


def markdown(report: SweepReport) -> str:
    parts = ["# OPI sweep report", ""]
    for line in header(report):
        parts += [line, ""]
    parts += ["## Verdict", "", verdict(report)[0], "", *[f"- {line}" for line in verdict(report)[1:]], ""]
    for section in ordered(report):
        if section is None:
            parts += [f"![{FIGURES[name]}]({name})\n" for name in figure_names(report)]
            continue
        title, caption, table = section
        parts += [f"## {title}", "", *([caption, ""] if caption else []), tables.markdown_table(table), ""]
    return "\n".join(parts + [*[f"{line}\n" for line in notes(report)]])


def summary_markdown(report: SweepReport) -> str:
    """The verdict, the header and the ranking table with intervals: the parent run's description (MLflow shows
    its first lines until "Show more": the verdict first)."""
    from opi.report.sections import ranking

    _, caption, table = ranking(report, compact=True)
    lines = verdict(report)
    parts = [lines[0], "", *[f"- {line}" for line in lines[1:]], ""]
    parts += [part for line in header(report) for part in (line, "")]
    parts += [tables.markdown_table(table), "", caption]
    return "\n".join(parts)


def figure_names(report: SweepReport) -> list[str]:
    return ["bars.png", *(["heatmap.png"] if report.relation_tables else [])]


def ordered(report: SweepReport) -> list[tuple[str, str, pd.DataFrame] | None]:
    """The sections with the figures' place (None) after the ranking and, where there are bounds, their table."""
    found = sections(report)
    place = min(2 if (report.overall["kind"] == "bound").any() else 1, len(found))
    return [*found[:place], None, *found[place:]]


def inline(text: str) -> str:
    """A Markdown line as HTML: escaped, ``**bold**`` kept."""
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text))


def html_page(report: SweepReport, images: dict[str, bytes]) -> str:
    """One self-contained page: every figure embedded as a data URI, so it renders from MLflow's artifact viewer
    (which serves the file alone) as well as from a folder."""
    lines = verdict(report)
    body = ["<h1>OPI sweep report</h1>", *[f"<p class='header'>{inline(line)}</p>" for line in header(report)],
            "<h2>Verdict</h2>", f"<p>{inline(lines[0])}</p>",
            *(["<ul>" + "".join(f"<li>{inline(line)}</li>" for line in lines[1:]) + "</ul>"] if lines[1:] else [])]
    for section in ordered(report):
        if section is None:
            body += [f'<p><img src="data:image/png;base64,{base64.b64encode(images[name]).decode()}" '
                     f'alt="{FIGURES[name]}"></p>' for name in figure_names(report) if name in images]
            continue
        title, caption, table = section
        body += [f"<h2>{html.escape(title)}</h2>", *([f"<p class='caption'>{inline(caption)}</p>"] if caption else []),
                 tables.html_table(table)]
    body += [f"<p class='caption'>{inline(line)}</p>" for line in notes(report)]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>OPI sweep report</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>")
