"""Prefect around the stages: cached tasks and their keys, the stage cache's files and locks, the temporary server,
the task runners. Prefect's private interfaces are used in ``prefect_adapter`` only."""
