"""``opi-eval``: evaluate one configuration, or a sweep of them; each is one Prefect flow run and one MLflow run.

    opi-eval                                   # kNN, extractive reader, local classifier, bundled data
    opi-eval experiment=paper_grid_bounds      # the paper's 13 configurations and two bounds under one parent run
    opi-eval -m retriever=knn,bm25 chunking=paper,small
"""
from __future__ import annotations

import dataclasses
import sys

import hydra
from omegaconf import DictConfig

from flows.cli.start import run_command, start_command
from flows.run.config import CONF_DIR, register_configs


def main() -> None:
    start_command()
    register_configs()
    sys.argv = [sys.argv[0], *for_every_combination(sys.argv[1:])]
    run_command(evaluate)


def for_every_combination(arguments: list[str]) -> list[str]:
    """``combination.<setting>=<value>`` where the default combination (one retriever: ``single``) has no such
    setting and the command line chooses no combination of its own (``-m setup=a_seven,a_four combination.k=null``,
    ``experiment=paper_grid combination.k=8``): given as ``++combination.<setting>=...``, so that the sweep's base
    configuration, which has the default combination, composes; each configuration is then checked with it, and one
    whose combination lacks the setting is refused in one line (``flows.run.config.check_combination_settings``).
    Anything else is left as it is."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from flows.run.config import component_class

    try:
        parsed = OverridesParser.create().parse_overrides([a for a in arguments if "=" in a and not a.startswith("-")])
    except HydraException:
        return arguments  # Hydra says what is wrong with it
    chosen = any(o.key_or_group in ("setup", "combination") and not o.is_sweep_override() and o.package is None
                 and not o.is_delete() for o in parsed)
    default = component_class("combination", "single")
    settings = {f.name for f in dataclasses.fields(default)} if dataclasses.is_dataclass(default) else set()
    plain = {o.input_line for o in parsed if not chosen and o.key_or_group.startswith("combination.")
             and o.key_or_group.split(".")[1] not in settings and not o.is_sweep_override()
             and not (o.is_add() or o.is_force_add() or o.is_delete())}
    return [f"++{a}" if a in plain else a for a in arguments]


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def evaluate(cfg: DictConfig) -> float:
    from flows.run.job import evaluate_job  # after start_command: Prefect and MLflow read the environment on import

    return evaluate_job(cfg)


if __name__ == "__main__":
    main()
