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
from dataclasses import dataclass, field
from typing import Mapping, Sequence

MAX_STAKE = 0.5  # |d - m| <= 2, so a stake under 1/2 keeps every factor 1 + stake * (d - m) positive


@dataclass(frozen=True)
class Elimination:
    """A configuration dropped: by whom, after how many clusters, the mean difference then, the evidence."""
    configuration: str
    by: str
    clusters: int
    difference: float
    evidence: float  # the e-value reached (>= the threshold)


@dataclass
class _Pair:
    wealth: float = 0.0  # log
    seen: float = 0.0  # sum of the differences seen
    count: int = 0
    bets: list[float] = field(default_factory=list)  # the centred differences seen, for the stake


class Race:
    def __init__(self, configurations: Sequence[str], clusters: int, alpha: float = 0.05):
        if len(set(configurations)) != len(configurations) or len(configurations) < 2:
            raise ValueError("a race needs at least two distinct configurations")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.alive = list(configurations)
        self.clusters, self.alpha = clusters, alpha
        self.threshold = (len(configurations) - 1) / alpha
        self.seen = 0
        self.eliminated: list[Elimination] = []
        self._pairs = {(l, c): _Pair() for l in configurations for c in configurations if l != c}

    def observe(self, means: Mapping[str, float]) -> list[Elimination]:
        """One more cluster: each surviving configuration's mean metric over it (in [0, 1]). Returns who is dropped
        now (they are no longer compared, nor drop others)."""
        if self.seen >= self.clusters:
            raise ValueError(f"all {self.clusters} clusters have been observed")
        left = self.clusters - self.seen  # this cluster included
        for l in self.alive:
            for c in self.alive:
                if l != c:
                    self._bet(self._pairs[l, c], float(means[l]) - float(means[c]), left)
        self.seen += 1
        dropped = []
        for c in list(self.alive):
            best = max(((self._pairs[l, c].wealth, l) for l in self.alive if l != c and l not in
                        {d.configuration for d in dropped}), default=None)
            if best is not None and best[0] >= math.log(self.threshold):
                pair = self._pairs[best[1], c]
                dropped.append(Elimination(c, best[1], self.seen, pair.seen / pair.count, math.exp(best[0])))
        for elimination in dropped:
            self.alive.remove(elimination.configuration)
        self.eliminated += dropped
        return dropped

    @staticmethod
    def _bet(pair: _Pair, difference: float, left: int) -> None:
        expected = -pair.seen / left  # the next cluster's mean difference were the two means equal
        centred = difference - expected
        pair.wealth += math.log1p(_stake(pair.bets) * centred)
        pair.bets.append(centred)
        pair.seen += difference
        pair.count += 1


def _stake(bets: Sequence[float]) -> float:
    """The stake on the next cluster, from the differences before it only (approximate GRAPA: mean over second
    moment, with a prior of one zero-mean observation of variance 1/4), clipped to [0, MAX_STAKE)."""
    n = len(bets)
    mean = sum(bets) / (n + 1)
    second = (sum(b * b for b in bets) + 0.25) / (n + 1)
    return min(max(mean / second, 0.0), MAX_STAKE - 1e-9)
