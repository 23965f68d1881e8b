"""``opi-eval``: evaluate one configuration, or a sweep of them; each is one Prefect flow run and one MLflow run.

    opi-eval                                   # kNN, extractive reader, local classifier, bundled data
    opi-eval experiment=paper_grid_bounds      # the paper's 13 configurations and two bounds under one parent run
    opi-eval -m retriever=knn,bm25 chunking=paper,small
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from flows.cli.start import run_command, start_command
from flows.run.config import CONF_DIR, register_configs


def main() -> None:
    start_command(early_prefect=True)
    register_configs()
    run_command(evaluate)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def evaluate(cfg: DictConfig) -> float:
    from flows.run.job import evaluate_job  # after start_command: Prefect and MLflow read the environment on import

    return evaluate_job(cfg)


if __name__ == "__main__":
    main()
