"""``opi-train-classifier``: the paper's RAG-QA-1300 recipe for the relation classifier (``flows.training``).

    opi-train-classifier train.per_relation=10                      # bundled set: 10 per relation, 8/2 split
    opi-train-classifier train=openai dataset=rag12000 dataset.path=... dataset.labels_path=...
    opi-train-classifier train=none llm=local classifier=llm train.per_relation=10
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from flows.cli.start import run_command, start_command
from flows.run.config import CONF_DIR, checked, register_configs


def main() -> None:
    start_command(early_prefect=True)
    register_configs()
    run_command(train)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train_classifier")
def train(cfg: DictConfig) -> float:
    from flows.base.errors import run_or_explain  # after start_command: Prefect and MLflow read the environment
    from flows.run.preflight import check_models, classifier_models
    from flows.training.classifier import train_classifier

    config = checked(cfg)
    run_or_explain(check_models, config, classifier_models(config))  # one line, before the data loads
    metrics = run_or_explain(train_classifier, config)
    return float(metrics.get("accuracy", 0.0))


if __name__ == "__main__":
    main()
