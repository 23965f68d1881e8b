"""BERTSim, LRCR and OPI (Hu, Zhou & Wang 2024, "Intrinsic Evaluation of RAG Systems for Deep-Logic Questions").

- BERTSim (B): mean cosine similarity between the embeddings of ground-truth and generated answers.
- LRCR (L, logical-relation correctness ratio): share of examples whose predicted relation equals the gold one.
- OPI(β) (overall performance index): the weighted harmonic mean of B and L,
  ``(1 + β²)·B·L / (B + β²·L)``. β > 1 leans towards B (answers), β < 1 towards L (relations): the paper's
  reading "OPI-2 favours answers, OPI-0.5 favours relations" and the checks B=0.8, L=0.5 -> OPI-2=0.7143,
  OPI-0.5=0.5405 fix where β² goes (written ``β²·B + L`` in some summaries, which would invert that reading).

Edge cases: OPI is 0 when B or L is 0 (the harmonic mean of anything with 0), including both 0. A relation with no
examples has no B, L or OPI: it is left out of every average and counted in ``relations_present``.
Over relations, two summaries: ``pooled_opi`` = the paper's Formula (3), ``(1+β²)·ΣB·ΣL / (ΣB + β²·ΣL) / |L|``
(for β = 1: ``(2/|L|)·ΣB·ΣL/(ΣB+ΣL)``), i.e. OPI of the mean B and mean L over relations; and ``mean_opi`` = the
mean of the per-relation OPIs, which is lower when relations are uneven.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from opi.metrics.names import BERTSIM, LRCR

PAPER_BETAS = (0.5, 1.0, 2.0)


def opi(bertsim, lrcr, beta: float = 1.0):
    """OPI(β) of scalars (a float back) or of equally shaped arrays (an array back, element by element)."""
    if beta <= 0:
        raise ValueError(f"OPI needs beta > 0, got {beta}")
    b, l_ = np.asarray(bertsim, dtype=float), np.asarray(lrcr, dtype=float)
    if (b < 0).any() or (l_ < 0).any():
        raise ValueError(f"OPI needs non-negative inputs, got B={bertsim}, L={lrcr}")
    if beta <= 1:  # (1+β²)·B·L / (B + β²·L)
        scale, on_b, on_l = 1 + beta * beta, 1.0, beta * beta
    else:  # the same divided through by β², so a huge β cannot overflow: (1/β² + 1)·B·L / (B/β² + L)
        inverse = (1 / beta) ** 2
        scale, on_b, on_l = inverse + 1, inverse, 1.0
    denominator = on_b * b + on_l * l_
    value = np.where(denominator == 0, 0.0, scale * b * l_ / np.where(denominator == 0, 1.0, denominator))
    return float(value) if value.ndim == 0 else value


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices (0 for a zero vector)."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms == 0, 0.0, (a * b).sum(axis=1) / np.where(norms == 0, 1.0, norms))


def bertsim(similarities: Sequence[float]) -> float:
    """Mean of per-example answer similarities. Cosine can be negative; B is clipped at 0 for OPI only."""
    if len(similarities) == 0:
        raise ValueError("BERTSim of zero examples is undefined")
    return float(np.mean(similarities))


def lrcr(gold: Sequence[str], predicted: Sequence[str]) -> float:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels vs {len(predicted)} predictions")
    if len(gold) == 0:
        raise ValueError("LRCR of zero examples is undefined")
    return float(np.mean([g == p for g, p in zip(gold, predicted)]))


def per_relation_table(rows: pd.DataFrame, relations: Sequence[str], betas: Sequence[float] = PAPER_BETAS
                       ) -> pd.DataFrame:
    """One row per relation with examples: n, bertsim, lrcr, opi_<β> for each β.

    ``rows`` has one row per example with columns ``relation`` (gold), ``predicted_relation`` and ``similarity``.
    Labels outside ``relations`` are an error: they would silently shrink the denominators.
    """
    unknown = sorted(set(rows["relation"]) - set(relations))
    if unknown:
        raise ValueError(f"gold relations not in the label set: {unknown}")
    records = []
    for relation in relations:
        group = rows[rows["relation"] == relation]
        if group.empty:
            continue
        b = bertsim(group["similarity"].tolist())
        l_ = lrcr(group["relation"].tolist(), group["predicted_relation"].tolist())
        record = {"relation": relation, "n": len(group), BERTSIM: b, LRCR: l_}
        record.update({beta_key(beta): opi(max(b, 0.0), l_, beta) for beta in betas})
        records.append(record)
    return pd.DataFrame.from_records(records, columns=["relation", "n", BERTSIM, LRCR,
                                                       *[beta_key(b) for b in betas]])


def beta_key(beta: float) -> str:
    """Metric name for a β: 1 -> opi_1, 0.5 -> opi_0_5, 2 -> opi_2."""
    return "opi_" + (f"{beta:g}").replace(".", "_")


def pooled_opi(table: pd.DataFrame, beta: float = 1.0) -> float:
    """Formula (3) over the relations present in ``table``."""
    if table.empty:
        raise ValueError("no relation has examples")
    n = len(table)
    return opi(max(float(table[BERTSIM].sum()), 0.0) / n, float(table[LRCR].sum()) / n, beta)


def mean_opi(table: pd.DataFrame, beta: float = 1.0) -> float:
    if table.empty:
        raise ValueError("no relation has examples")
    return float(np.mean([opi(max(b, 0.0), l_, beta) for b, l_ in zip(table[BERTSIM], table[LRCR])]))


def summary(rows: pd.DataFrame, relations: Sequence[str], betas: Sequence[float] = PAPER_BETAS
            ) -> tuple[dict[str, float], pd.DataFrame]:
    """Headline metrics and the per-relation table for one configuration's per-example rows.

    Headline ``bertsim`` and ``lrcr`` are over all examples (the paper's B_D and L_D); ``opi_<β>`` is Formula (3)
    over relations and ``opi_<β>_mean`` the mean of per-relation OPI.
    """
    table = per_relation_table(rows, relations, betas)
    metrics = {
        BERTSIM: bertsim(rows["similarity"].tolist()),
        LRCR: lrcr(rows["relation"].tolist(), rows["predicted_relation"].tolist()),
        "n_examples": float(len(rows)),
        "relations_present": float(len(table)),
    }
    for beta in betas:
        metrics[beta_key(beta)] = pooled_opi(table, beta)
        metrics[beta_key(beta) + "_mean"] = mean_opi(table, beta)
    return metrics, table
