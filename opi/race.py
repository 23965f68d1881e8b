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

``test="asymptotic"``: instead of betting, each pair's lower confidence bound from an asymptotic confidence
sequence, whose width scales with the paired differences' observed standard deviation, not their range: far
fewer clusters where configurations differ by little (``docs/performance.md`` section 11), with a guarantee that
holds as the number of clusters grows, not at every size (simulated there); no bound before ``min_clusters``.

``indifference`` (delta > 0, asymptotic test only): differences under delta do not matter to the user (an
indifference zone, as in Bechhofer's ranking and selection). The leader also drops a configuration once it is shown
no worse than it by more than delta (its lower bound of leader - c above -delta), and is then kept to the end,
never dropped. The best can be dropped only through one of its K - 1 pairs: where their sequences all hold (the
same event as above, probability about 1 - alpha), it is never dropped as worse, and if it is dropped as within
delta, the one that dropped it is within delta of it and survives. So a configuration within delta of the best
survives; near-equal configurations stop costing evaluations once one of them stands for the others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

TESTS = ("betting", "asymptotic")
MAX_STAKE = 0.5  # |d - m| <= 2, so a stake under 1/2 keeps every factor 1 + stake * (d - m) positive


@dataclass(frozen=True)
class Elimination:
    """A configuration dropped: by whom, after how many clusters, the mean difference then, the evidence."""
    configuration: str
    by: str
    clusters: int
    difference: float
    evidence: float  # betting: the e-value reached (>= the threshold); asymptotic: the difference's lower bound (> 0;
    # > -indifference when dropped as within)
    within: bool = False  # dropped as within ``indifference`` of ``by`` (its lower bound > -indifference), not worse


class Race:
    def __init__(self, configurations: Sequence[str], clusters: int, alpha: float = 0.05, test: str = "betting",
                 min_clusters: int = 10, indifference: float = 0.0):
        if len(set(configurations)) != len(configurations) or len(configurations) < 2:
            raise ValueError("a race needs at least two distinct configurations")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if test not in TESTS:
            raise ValueError(f"test must be one of {', '.join(TESTS)}, got {test!r}")
        if not (math.isfinite(indifference) and indifference >= 0) or (indifference > 0 and test != "asymptotic"):
            raise ValueError(f"indifference must be >= 0, and 0 with the betting test, got {indifference}")
        self.indifference = indifference
        self.test, self.min_clusters = test, min_clusters
        # the asymptotic sequence's tuning: tightest around a quarter of the clusters (Waudby-Smith et al., eq. 2.3)
        level = alpha / (len(configurations) - 1)
        self._rho2 = (-2 * math.log(level) + math.log(-2 * math.log(level) + 1)) / max(clusters / 4, 1)
        self.names = list(configurations)
        self.clusters, self.alpha = clusters, alpha
        self.threshold = (len(configurations) - 1) / alpha
        self.seen = 0
        self.eliminated: list[Elimination] = []
        k = len(configurations)
        self._alive = np.ones(k, dtype=bool)
        self._kept = np.zeros(k, dtype=bool)  # dropped another as within ``indifference``: never dropped
        # per ordered pair (row l, column c): log wealth, sum of differences, sums of the centred bets and squares
        self._wealth, self._sum = np.zeros((k, k)), np.zeros((k, k))
        self._bets, self._squares = np.zeros((k, k)), np.zeros((k, k))
        self._differences2 = np.zeros((k, k))  # sum of squared differences (the asymptotic sequence's variance)

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
        self._differences2 += np.where(pairs, difference * difference, 0.0)
        self.seen += 1
        if self.test == "betting":
            evidence, bar = np.where(pairs, self._wealth, -np.inf), math.log(self.threshold)
        else:
            lower = self._lower_bounds()
            evidence, bar = np.where(pairs, lower, -np.inf), 0.0
        strongest = evidence.argmax(axis=0)  # for each c, the l with the most evidence against it
        dropped = []
        for c in np.flatnonzero(alive & ~self._kept):
            l = int(strongest[c])
            if evidence[l, c] > bar or (self.test == "betting" and evidence[l, c] == bar):  # by any l alive before
                shown = math.exp(evidence[l, c]) if self.test == "betting" else float(evidence[l, c])
                dropped.append(Elimination(self.names[c], self.names[l], self.seen, self._sum[l, c] / self.seen,
                                           shown))
        for elimination in dropped:
            self._alive[self.names.index(elimination.configuration)] = False
        if self.indifference > 0 and self.seen >= max(self.min_clusters, 2):
            dropped += self._within_indifference(lower)
        self.eliminated += dropped
        return dropped

    def _within_indifference(self, lower: np.ndarray) -> list[Elimination]:
        """The leader (the highest mean over the clusters seen) drops each configuration it is shown no worse than
        by more than ``indifference``, and is kept to the end."""
        alive = np.flatnonzero(self._alive)
        if len(alive) < 2:
            return []
        leader = int(alive[np.argmax(self._sum[np.ix_(alive, alive)].sum(axis=1))])
        lower = lower[leader]
        dropped = [Elimination(self.names[c], self.names[leader], self.seen, self._sum[leader, c] / self.seen,
                               float(lower[c]), within=True)
                   for c in alive if c != leader and not self._kept[c] and lower[c] > -self.indifference]
        for elimination in dropped:
            self._alive[self.names.index(elimination.configuration)] = False
        self._kept[leader] |= bool(dropped)
        return dropped

    @property
    def settled(self) -> bool:
        """Racing on would change nothing the survivors guarantee: each one left is kept (it stands for some
        within ``indifference``), is shown within ``indifference`` of a kept survivor (which then stands for it
        too), or is shown better than every other survivor (a kept one is never dropped, and nothing else is left
        that could drop it). Only a covered survivor could still go, dropped as within by a leader."""
        alive = np.flatnonzero(self._alive)
        if not self._kept[alive].any():
            return False
        lower = self._lower_bounds()
        kept = alive[self._kept[alive]]
        for c in alive[~self._kept[alive]]:
            others = alive[alive != c]
            if not (np.any(lower[kept, c] > -self.indifference) or np.all(lower[c, others] > 0)):
                return False
        return True

    @property
    def all_kept(self) -> bool:
        """Each survivor stands for some within ``indifference`` (dropped one as within it)."""
        return bool(np.all(self._kept[self._alive]))

    def tied(self, margin: float) -> bool:
        """The survivors are within ``margin`` of each other: every pair's difference bounded to (-margin, margin)
        by the asymptotic sequence (a tie is an answer: racing on would only separate what does not matter)."""
        alive = np.flatnonzero(self._alive)
        if len(alive) < 2:
            return False
        radius = self._radii()
        mean = self._sum / max(self.seen, 1)
        pairs = np.ix_(alive, alive)
        upper = (mean + radius)[pairs]
        off_diagonal = ~np.eye(len(alive), dtype=bool)
        return bool(np.all(upper[off_diagonal] < margin))

    def difference(self, first: str, second: str) -> tuple[float, float, float]:
        """``first``'s mean minus ``second``'s over the clusters both were seen on, with its asymptotic confidence
        sequence's bounds at this look, within [-1, 1] where means in [0, 1] can differ (infinite before
        ``min_clusters``)."""
        l, c = self.names.index(first), self.names.index(second)
        seen = self.eliminated_after(first, second)
        mean, radius = self._sum[l, c] / max(seen, 1), float(self._radii(seen)[l, c])
        low, high = (mean - radius, mean + radius) if math.isinf(radius) else (max(mean - radius, -1.0),
                                                                               min(mean + radius, 1.0))
        return float(mean), float(low), float(high)

    def eliminated_after(self, *names: str) -> int:
        """The clusters on which all of ``names`` were compared: until the first of them was dropped."""
        dropped = {e.configuration: e.clusters for e in self.eliminated}
        return min([dropped.get(name, self.seen) for name in names])

    def _radii(self, seen: int | None = None) -> np.ndarray:
        t = self.seen if seen is None else seen
        if t < max(self.min_clusters, 2):
            return np.full(self._sum.shape, np.inf)
        variance = np.maximum(self._differences2 - self._sum ** 2 / t, 0.0) / (t - 1)
        level, rho2 = self.alpha / (len(self.names) - 1), self._rho2
        return np.sqrt(variance) * math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2)
                                             * math.log(math.sqrt(t * rho2 + 1) / level))

    def _lower_bounds(self) -> np.ndarray:
        """Each pair's lower bound of its mean difference: the asymptotic confidence sequence (a Robbins normal
        mixture over the sample's standard deviation; Waudby-Smith, Arnold, Wu, Zhou, Ramdas, "Time-uniform central
        limit theory and asymptotic confidence sequences") at level alpha / (K - 1); none before ``min_clusters``."""
        return self._sum / max(self.seen, 1) - self._radii()
