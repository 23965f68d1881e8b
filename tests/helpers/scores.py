"""Three configurations x two examples: people's 0-3-7 scores and a [0, 1] metric, chosen so that their rankings
of the configurations differ; and the answers given, A and C giving the same answer to e1 (people score it once)."""
import pandas as pd

HUMAN = {("e1", "A"): 7, ("e2", "A"): 7, ("e1", "B"): 3, ("e2", "B"): 0, ("e1", "C"): 7, ("e2", "C"): 3}
METRIC = {("e1", "A"): 0.9, ("e2", "A"): 0.8, ("e1", "B"): 0.5, ("e2", "B"): 0.9, ("e1", "C"): 0.4, ("e2", "C"): 0.9}
GENERATED = {("e1", "A"): "G1", ("e1", "C"): "G1", ("e1", "B"): "G2", ("e2", "A"): "G3", ("e2", "B"): "G4",
             ("e2", "C"): "G5"}


def scored() -> pd.DataFrame:
    """One row per (example, configuration) with both scores."""
    keys = list(HUMAN)
    return pd.DataFrame({"example_id": [k[0] for k in keys], "configuration": [k[1] for k in keys],
                         "score": [HUMAN[k] for k in keys], "metric": [METRIC[k] for k in keys]})
