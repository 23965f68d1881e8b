"""What every console entry point does around its work: checked config in, user errors out as one line + exit 2."""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from omegaconf import DictConfig

from opi.schemas import OPIConfig

log = logging.getLogger("opi")
EXIT_USER_ERROR = 2


def console_logging(*noisy: str) -> None:
    """Logging for the argparse commands (opi-annotate, opi-report, opi-nightly): OPI's messages at INFO, also
    where Prefect has configured the root logger first (its handler then prints them); ``noisy`` libraries at
    WARNING."""
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    log.setLevel(logging.INFO)
    for name in ("mlflow", "alembic", *noisy):
        logging.getLogger(name).setLevel(logging.WARNING)


def add_store_arguments(parser) -> None:
    """Where the MLflow runs are: the same defaults as conf/tracking/local.yaml."""
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    parser.add_argument("--experiment", default="opi")


def checked(cfg: DictConfig) -> OPIConfig:
    """The typed configuration after every check (exit 2 with the reason otherwise)."""
    from hydra.core.hydra_config import HydraConfig

    from flows.config import typed

    overridden = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    try:
        return typed(cfg, overridden)
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        sys.exit(EXIT_USER_ERROR)


def run_or_explain(work: Callable[..., Any], *args: Any) -> Any:
    """Run ``work``; a problem the user can fix (data, LLM endpoint) ends the run with its message, no traceback."""
    from opi.data import DataError
    from opi.llm.client import LLMError

    try:
        return work(*args)
    except DataError as err:
        log.error("dataset problem: %s", err)
    except LLMError as err:
        log.error("LLM endpoint problem: %s", err)
    sys.exit(EXIT_USER_ERROR)
