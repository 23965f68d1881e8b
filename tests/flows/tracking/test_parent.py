from omegaconf import OmegaConf

from flows.tracking.parent import parent_name, swept


def hydra_config(params: dict, task: list[str]):
    return OmegaConf.create({"hydra": {"sweeper": {"params": params}, "overrides": {"task": task}}})


def test_the_parent_is_named_by_its_experiment_and_what_the_command_line_sweeps():
    config = hydra_config({"setup": "knn,bm25"}, ["retriever.k=2,4", "dataset.limit=5",
                                                  "tracking.tracking_uri=sqlite:////tmp/x/mlflow.db"])
    assert swept(config) == {"setup": "knn,bm25", "retriever.k": "2,4"}
    assert parent_name(config, "smoke") == "smoke: retriever.k=2,4"  # the experiment's own sweep: its name says it
    assert parent_name(hydra_config({"setup": "a,b"}, ["dataset.limit=5"]), "paper_grid") == "paper_grid"
    assert parent_name(hydra_config({}, ["setup=knn,bm25", "llm.api_key=sk-abcdefghijkl,sk-mnopqrstuvwx"]),
                       "sweep") == "sweep: setup=knn,bm25"  # a secret-named setting is never in a name
