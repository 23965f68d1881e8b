"""The sweep report: the paper's tables with uncertainty, figures, and a verdict read in a minute.

Input: each configuration's per-example predictions (as ``opi.predictions.prediction_rows`` writes them), named
by what varies in the sweep (``opi.naming``). Output (``SweepReport.write``): csv tables, ``bars.png`` (the headline
metrics with their intervals), ``heatmap.png`` (relation x configuration), ``report.md`` and a self-contained
``report.html``; ``SweepReport.summary_markdown`` is the parent run's description.

- ``base``: the inputs (``Configuration``, ``ReportSettings``), metric and configuration names.
- ``statistics``: the numbers, pure functions over per-example frames: every interval and paired test by the
  report's unit (article or example), Benjamini-Hochberg adjusted p-values, verdicts.
- ``tables`` and ``sections``: the tables as people read them (a value and its interval in one cell, no NaN),
  Markdown with every ``|`` escaped, HTML.
- ``plots``: the figures, axes scaled to the data; ``render``: header, verdict, Markdown and HTML;
  ``report``: ``SweepReport`` and ``build_report``.

Tables (csv): ``overall`` (one row per configuration, bounds included, best first, with intervals, the paired test
against the best and its verdict, the share of the bounds' gap closed), ``relation_<metric>``, ``answer_quality``,
``strengths`` (per relation, the best contender against its runner-up), ``retrieval`` (nDCG, MRR and recall against
the gold evidence; S- configurations have recall only; the oracle is perfect by construction, never compared),
``calibrated`` (LRCR and OPI-1 calibrated by people's labels).
"""
from opi.report.base import GOLD_SOURCES, PERFECT, RECALL_ONLY, SCOPES, Configuration, ReportSettings, display
from opi.report.report import SweepReport, build_report
from opi.report.statistics import ANSWER_SCORES, CALIBRATED, SHOWN_MEANS, paired_rows, retrieval_ndcg

__all__ = ["ANSWER_SCORES", "CALIBRATED", "Configuration", "GOLD_SOURCES", "PERFECT", "RECALL_ONLY",
           "ReportSettings", "SCOPES", "SHOWN_MEANS", "SweepReport", "build_report", "display", "paired_rows",
           "retrieval_ndcg"]
