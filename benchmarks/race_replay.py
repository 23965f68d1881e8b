"""A race replayed offline over a full grid's scores (issue #42, ``docs/performance.md`` section 11g).

    python benchmarks/race_grid.py --grid large --docs 260 --scores scores.json   # the grid's score per article
    python benchmarks/race_replay.py scores.json [--orders 20] [--indifference 0 0.005 0.01 0.02] [--rounds 10]

Each configuration's score on each article is what the race would see (``opi.racing.cluster_scores``), so a race
can be run again over them in other orders of the articles, by ``opi.race.Race`` as ``flows.run.race`` runs it:
the articles shuffled (seeded), dealt into ``--rounds`` rounds, every survivor paying for a whole round, the race
stopping when one is left, no survivor can be dropped, the survivors tie within ``--margin`` or the data runs out.
Printed per setting, over the orders: the cost (the rounds' share of the grid's evaluations, articles counted),
the configurations left, and in how many orders the grid's best (the highest average over articles) survived, and
one within the indifference zone of it.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from opi.race import Race


def replay(scores: dict[str, dict[str, float]], seed: int, rounds: int, alpha: float, margin: float,
           min_clusters: int, indifference: float) -> tuple[float, list[str]]:
    names, clusters = sorted(scores), sorted(next(iter(scores.values())))
    random.Random(seed).shuffle(clusters)
    race, spent = Race(names, len(clusters), alpha, "asymptotic", min_clusters, indifference), 0
    for dealt in (clusters[r::rounds] for r in range(rounds)):
        spent += len(race.alive) * len(dealt)
        for cluster in dealt:
            if len(race.alive) > 1:
                race.observe({name: scores[name][cluster] for name in race.alive})
        if len(race.alive) == 1 or race.settled or race.tied(margin):
            break
    return spent / (len(names) * len(clusters)), race.alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scores", type=Path)
    parser.add_argument("--orders", type=int, default=20)
    parser.add_argument("--indifference", type=float, nargs="+", default=[0.0, 0.005, 0.01, 0.02])
    parser.add_argument("--rounds", type=int, nargs="+", default=[10])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--min-clusters", type=int, default=10)
    args = parser.parse_args()
    grid = json.loads(args.scores.read_text())
    scores = grid["scores"]
    means = {name: float(np.mean(list(values.values()))) for name, values in scores.items()}
    best = max(means, key=means.get)
    print(f"{len(scores)} configurations, {len(scores[best])} articles, by {grid['metric']}; the grid's best: {best} "
          f"({means[best]:.4f})")
    for rounds in args.rounds:
        for delta in args.indifference:
            runs = [replay(scores, seed, rounds, args.alpha, args.margin, args.min_clusters, delta)
                    for seed in range(args.orders)]
            costs = [cost for cost, _ in runs]
            print(f"rounds {rounds}, indifference {delta:g}: cost {np.mean(costs):.3f} ({min(costs):.3f}-"
                  f"{max(costs):.3f}), left {np.mean([len(alive) for _, alive in runs]):.1f}, best kept "
                  f"{sum(best in alive for _, alive in runs)}/{args.orders}, one within the zone kept "
                  f"{sum(max(means[n] for n in alive) >= means[best] - delta for _, alive in runs)}/{args.orders}")


if __name__ == "__main__":
    main()
