"""Racing configurations over clusters of examples: which configurations can be dropped as whole articles arrive,
with the chance of ever dropping the best held under ``alpha``, however often the race is looked at.

The unit is a cluster (an article): each configuration's mean metric over the cluster's examples, in [0, 1].
Clusters arrive one at a time, in an order drawn once (the same for every configuration), without replacement
from the data's ``clusters``. For each ordered pair (``l``, ``c``) of surviving configurations a betting e-process
(Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS B 2024, the
without-replacement form) tests "over the data's clusters, ``l``'s mean is no higher than ``c``'s": each cluster's
difference d = l - c is bet on against what the not yet seen clusters would average were the two means equal
(minus the sum seen, over the clusters left), with a stake fitted to the differences before it (predictable). Under
that null the wealth is a nonnegative supermartingale, so by Ville's inequality it ever reaches ``1 / level`` with
probability at most ``level``. ``c`` is dropped when some surviving ``l``'s wealth against it reaches
``(K - 1) / alpha``: the best configuration can be dropped only through one of its K - 1 pairs, each at level
``alpha / (K - 1)`` whenever it is looked at, so the best survives with probability at least ``1 - alpha``
(a union bound; no planned number of rounds). "Best" is the highest mean over the data's clusters: the full grid's
best on the race metric.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

MAX_STAKE = 0.5  # |d - m| <= 2, so a stake under 1/2 keeps every factor 1 + stake * (d - m) positive


@dataclass(frozen=True)
class Elimination:
    """A configuration dropped: by whom, after how many clusters, the mean difference then, the evidence."""
    configuration: str
    by: str
    clusters: int
    difference: float
    evidence: float  # the e-value reached (>= the threshold)


class Race:
    def __init__(self, configurations: Sequence[str], clusters: int, alpha: float = 0.05):
        if len(set(configurations)) != len(configurations) or len(configurations) < 2:
            raise ValueError("a race needs at least two distinct configurations")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.names = list(configurations)
        self.clusters, self.alpha = clusters, alpha
        self.threshold = (len(configurations) - 1) / alpha
        self.seen = 0
        self.eliminated: list[Elimination] = []
        k = len(configurations)
        self._alive = np.ones(k, dtype=bool)
        # per ordered pair (row l, column c): log wealth, sum of differences, sums of the centred bets and squares
        self._wealth, self._sum = np.zeros((k, k)), np.zeros((k, k))
        self._bets, self._squares = np.zeros((k, k)), np.zeros((k, k))

    @property
    def alive(self) -> list[str]:
        return [name for name, alive in zip(self.names, self._alive) if alive]

    def observe(self, means: Mapping[str, float]) -> list[Elimination]:
        """One more cluster: each surviving configuration's mean metric over it (in [0, 1]). Returns who is dropped
        now (they are no longer compared, nor drop others)."""
        if self.seen >= self.clusters:
            raise ValueError(f"all {self.clusters} clusters have been observed")
        alive = self._alive.copy()
        values = np.array([float(means[name]) if on else 0.0 for name, on in zip(self.names, alive)])
        pairs = alive[:, None] & alive[None, :]
        difference = values[:, None] - values[None, :]
        centred = difference + self._sum / (self.clusters - self.seen)  # minus what is left to see, were they equal
        n = self.seen + 1  # the prior counts as one observation
        stake = np.clip(self._bets / n / ((self._squares + 0.25) / n), 0.0, MAX_STAKE - 1e-9)
        self._wealth += np.where(pairs, np.log1p(stake * centred), 0.0)
        self._bets += np.where(pairs, centred, 0.0)
        self._squares += np.where(pairs, centred * centred, 0.0)
        self._sum += np.where(pairs, difference, 0.0)
        self.seen += 1
        evidence = np.where(pairs, self._wealth, -np.inf)
        strongest = evidence.argmax(axis=0)  # for each c, the l with the most evidence against it
        dropped = []
        for c in np.flatnonzero(alive):
            l = int(strongest[c])
            if evidence[l, c] >= math.log(self.threshold):  # by any configuration alive when the cluster came
                dropped.append(Elimination(self.names[c], self.names[l], self.seen, self._sum[l, c] / self.seen,
                                           math.exp(evidence[l, c])))
        for elimination in dropped:
            self._alive[self.names.index(elimination.configuration)] = False
        self.eliminated += dropped
        return dropped
