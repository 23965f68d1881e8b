"""The racing test's guarantee and cost, by simulation with known truth (issue #42): configurations with known
effects on clustered data, raced by ``opi.race.Race``; for each scenario, over ``--repeat`` races, how often the
truly best configuration (the highest mean over the data's clusters: the full grid's best) survives, and what
the race spent, as a share of the full grid's cluster evaluations.

    python benchmarks/race_simulation.py [--repeat 1000] [--alpha 0.05] [--test betting|asymptotic]
                                         [--indifference 0.01]

Scenarios: 10, 20, 40 and 60 configurations; effects spread evenly from 0 to 0 (all equal: the null), 0.05 or
0.1 (the best has the largest); 52 clusters (the bundled set's articles) and 240; each cluster has a base of its
own (uniform 0.2-0.8, shared by every configuration: paired data), each configuration's cluster mean is base +
effect + independent noise (sd ``--noise``, default 0.1 and 0.03), clipped to [0, 1]. A race stops when one
configuration is left or the clusters run out. With ``--indifference`` (the asymptotic test's ``race.indifference``)
also when no survivor can be dropped any more, and "near kept" is how often one within it of the best survived
(the guarantee then).
"""
from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from opi.race import Race


def race_once(effects: np.ndarray, clusters: int, noise: float, alpha: float, rng, test: str = "betting",
              indifference: float = 0.0) -> tuple[bool, bool, float, int]:
    base = rng.uniform(0.2, 0.8, clusters)
    means = np.clip(base[None, :] + effects[:, None] + rng.normal(0, noise, (len(effects), clusters)), 0, 1)
    names = [f"c{i}" for i in range(len(effects))]
    race, spent = Race(names, clusters, alpha, test=test, indifference=indifference), 0
    for j in rng.permutation(clusters):
        spent += len(race.alive)
        race.observe(dict(zip(names, means[:, j])))
        if len(race.alive) == 1 or race.settled:
            break
    truth = means.mean(axis=1)
    best = names[int(np.argmax(truth))]
    near = max(truth[names.index(name)] for name in race.alive) >= truth.max() - indifference
    return best in race.alive, near, spent / (len(names) * clusters), len(race.alive)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.03])
    parser.add_argument("--test", choices=["betting", "asymptotic"], default="betting")
    parser.add_argument("--indifference", type=float, default=0.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'configs':>7} {'spread':>6} {'clusters':>8} {'noise':>5} {'best kept':>9} {'near kept':>9} {'cost':>6} "
          f"{'left':>5}")
    started = time.perf_counter()
    for noise, clusters, k, spread in itertools.product(args.noise, (52, 240), (10, 20, 40, 60), (0.0, 0.05, 0.1)):
        effects = np.linspace(0, spread, k)
        runs = [race_once(effects, clusters, noise, args.alpha, rng, args.test, args.indifference)
                for _ in range(args.repeat)]
        kept, near, cost, left = (np.mean([r[i] for r in runs]) for i in range(4))
        print(f"{k:>7} {spread:>6.2f} {clusters:>8} {noise:>5.2f} {kept:>9.3f} {near:>9.3f} {cost:>6.2f} {left:>5.1f}",
              flush=True)
    print(f"({args.repeat} races a scenario, {args.test} test, indifference {args.indifference}, alpha {args.alpha}, "
          f"{time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
