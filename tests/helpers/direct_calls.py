"""``StageCalls`` without Prefect or a cache: each stage's function called in this process, in order, the stage
groups recorded."""
from __future__ import annotations


class DirectCalls:
    def __init__(self):
        self.stages: list[str] = []  # the stage group of each call_many, in order
        self.hits = self.misses = 0

    def call_many(self, stage, *calls):
        self.stages.append(stage.counted_as)
        self.misses += len(calls)
        return [stage.fn(*args) for args in calls]

    def call(self, stage, *args):
        return self.call_many(stage, args)[0]

    def counts(self) -> dict[str, float]:
        return {"cache_hits": float(self.hits), "cache_misses": float(self.misses)}
