"""What the report is built from: the configurations of a sweep, its settings, and how metrics and names are shown."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from opi.metrics.names import BERTSIM, LRCR
from opi.naming import Described, clean, short_names
from opi.schemas import ReportConfig

PERFECT = "perfect by construction"  # the oracle's retrieval note: it ranks from the gold evidence
RECALL_ONLY = "unordered: recall only"
GOLD_SOURCES = {"labels": "the data's relation labels",
                "classifier": "the relation classifier's labels of the gold answers (as in the paper): LRCR is "
                              "agreement between the classifier on the gold and on the generated answers",
                "none": "none (relations.gold=none): LRCR and OPI are not computed, configurations are ranked by "
                        "BERTSim"}
SCOPES = {"article": "within each example's own article (the paper's setting)",
          "corpus": "across one index of every article of the dataset (retrieval.scope=corpus), as deployed RAG does"}
RUN_NAME_SEPARATOR = " | "  # a run's full name: retrieval | reader | classifier


@dataclass(frozen=True)
class Configuration:
    """One configuration of a sweep, as its run recorded it."""
    name: str  # its name in the report: short (opi.naming.short_names), or the full run name the report shortens
    kind: str  # single | A- | S-
    setup: str  # kNN, A-Four, ...
    predictions: pd.DataFrame
    bound: str | None = None  # lower (random retriever) | upper (oracle) | None (a contender)
    calibrated: tuple[tuple[str, float], ...] = ()  # its LRCR / OPI-1 calibrated by people's labels (opi-label)


@dataclass(frozen=True)
class ReportSettings:
    """The report's statistics settings, and the sweep's β, seed and where its gold relations came from."""
    config: ReportConfig
    beta: float = 1.0
    seed: int = 0
    gold_source: str | None = None  # labels | classifier | none (relations.gold of the runs)
    incomplete: str | None = None  # why the sweep's report covers fewer configurations than it planned
    raced: str | None = None  # a raced sweep: what its race left out of the report
    scope: str | None = None  # article | corpus (retrieval.scope of the runs)
    fixed: tuple[tuple[str, str], ...] = ()  # the parts every configuration shares (opi.naming.short_names)


def display(metric: str) -> str:
    """opi_1 -> OPI-1, opi_0_5 -> OPI-0.5, bertsim -> BERTSim, lrcr -> LRCR, ndcg_at_4 -> nDCG@4."""
    if metric.startswith("opi_"):
        return "OPI-" + metric[4:].replace("_", ".")
    for prefix, shown in (("ndcg_at_", "nDCG@"), ("recall_at_", "recall@")):
        if metric.startswith(prefix):
            return shown + metric.removeprefix(prefix)
    return {BERTSIM: "BERTSim", LRCR: "LRCR", "mrr": "MRR", "judge_mean": "judge"}.get(metric, metric)


def labels_of(configurations: Sequence[Configuration], fixed: tuple[tuple[str, str], ...] = ()
              ) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Each configuration's name as the report shows it, and the parts they all share. Names as the caller gives
    them (the runs' short names) unless they are full run names (``kNN | extractive | local-clf``): those are split
    into their parts and named by ``opi.naming.short_names``."""
    if not any(RUN_NAME_SEPARATOR in c.name for c in configurations):
        return {c.name: clean(c.name) for c in configurations}, fixed
    described = []
    for c in configurations:
        retrieval, *rest = c.name.split(RUN_NAME_SEPARATOR)
        reader = rest[0] if rest else None
        classifier = RUN_NAME_SEPARATOR.join(rest[1:]) or None
        described.append(Described(retrieval, reader, classifier, {}))
    names, shared = short_names(described)
    return dict(zip((c.name for c in configurations), names)), fixed or tuple(shared.items())
