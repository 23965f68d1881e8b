"""Orchestration: Hydra entry points, Prefect flows and MLflow tracking around the plain ``opi`` library."""
import os

# Quiet, offline-friendly defaults; a user's own environment wins.
for _key, _value in {
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # a failed task or flow is reported once: by OPI (user errors, one line) or by Hydra (bugs), not also by Prefect
    "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "CRITICAL",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # also silences transformers' "Loading weights" bar
}.items():
    os.environ.setdefault(_key, _value)
