"""Where a configuration's stage tasks run: Prefect's thread pool, or Dask through prefect-dask (a local cluster or a
given scheduler)."""
from __future__ import annotations

from prefect.task_runners import ThreadPoolTaskRunner

from flows.orchestration.server import OrchestrationError
from opi.schemas import OrchestrationConfig


def task_runner(orchestration: OrchestrationConfig):
    if orchestration.runner == "threads":
        return ThreadPoolTaskRunner(max_workers=orchestration.max_workers)
    try:
        from prefect_dask import DaskTaskRunner  # an optional extra: pip install -e '.[dask]'
    except ImportError:
        raise OrchestrationError("orchestration=dask needs prefect-dask: pip install -e '.[dask]'") from None
    if orchestration.dask_address:
        return DaskTaskRunner(address=orchestration.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": orchestration.dask_workers, "processes": True,
                                         "threads_per_worker": orchestration.dask_threads_per_worker,
                                         "dashboard_address": None})
