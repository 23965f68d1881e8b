"""Which task runner an orchestration config gives (``flows.orchestration.runners.task_runner``): Prefect's thread pool
with ``max_workers`` threads, Dask at a given scheduler, or a local Dask cluster of ``dask_workers`` processes of
``dask_threads_per_worker`` threads and no dashboard; without prefect-dask, an ``OrchestrationError`` saying what to
install. Runners are only built, never started: no cluster, no server. Whole evaluations on the thread and Dask
runners, compared, are in tests/flows/cli/test_evaluate.py."""
import sys

import pytest
from prefect.task_runners import ThreadPoolTaskRunner

from flows.orchestration.runners import task_runner
from flows.orchestration.server import OrchestrationError
from opi.schemas import OrchestrationConfig


def test_threads_give_prefects_thread_pool_of_max_workers():
    runner = task_runner(OrchestrationConfig(runner="threads", max_workers=7, dask_workers=5))
    assert type(runner) is ThreadPoolTaskRunner and runner._max_workers == 7
    assert task_runner(OrchestrationConfig())._max_workers == 4  # the default: threads, 4 workers


def test_dask_with_an_address_connects_to_that_scheduler_and_makes_no_cluster():
    prefect_dask = pytest.importorskip("prefect_dask")
    runner = task_runner(OrchestrationConfig(runner="dask", dask_address="tcp://scheduler:8786", dask_workers=5))
    assert isinstance(runner, prefect_dask.DaskTaskRunner) and runner.address == "tcp://scheduler:8786"
    assert not runner.cluster_kwargs and runner._cluster is None


def test_dask_without_an_address_is_a_local_cluster_of_worker_processes_without_a_dashboard():
    prefect_dask = pytest.importorskip("prefect_dask")
    runner = task_runner(OrchestrationConfig(runner="dask", dask_workers=3, dask_threads_per_worker=2))
    assert isinstance(runner, prefect_dask.DaskTaskRunner) and runner.address is None
    assert runner.cluster_kwargs == {"n_workers": 3, "processes": True, "threads_per_worker": 2,
                                     "dashboard_address": None}


def test_dask_without_prefect_dask_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "prefect_dask", None)  # import prefect_dask now raises ImportError
    with pytest.raises(OrchestrationError, match=r"^orchestration=dask needs prefect-dask: pip install -e '\.\[dask\]'$"):
        task_runner(OrchestrationConfig(runner="dask"))
    assert isinstance(task_runner(OrchestrationConfig(runner="threads")), ThreadPoolTaskRunner)  # threads need none
