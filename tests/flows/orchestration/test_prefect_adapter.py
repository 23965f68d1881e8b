"""The Prefect behaviour OPI relies on without a public interface (``flows.orchestration.prefect_adapter``): each
test fails loudly when a Prefect release changes it, naming the version the adapter was checked against."""
import json
import subprocess
import sys

import prefect
import pytest
from prefect import task
from prefect.results import ResultStore

from flows.orchestration import prefect_adapter
from flows.orchestration.cache_files import CacheFileSystem
from tests.helpers.cli import cli_environment

CHECKED = f"(the adapter was checked with Prefect {prefect_adapter.CHECKED_WITH}; this is {prefect.__version__})"
TWICE = """
import json, sys
from flows.cli.start import start_command
start_command(early_prefect=True)
from prefect import flow, task
from flows.orchestration.cache import cached
from flows.orchestration.prefect_adapter import was_cached
from flows.orchestration.server import run_flow

@task
def double(value: int) -> int:
    return 2 * value

@flow
def run_twice():
    task_fn = cached(double, sys.argv[1])
    return [task_fn(21, return_state=True) for _ in range(2)]

states = run_flow(run_twice)
print(json.dumps([[state.result(), was_cached(state)] for state in states]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("prefect.server.database"))))
"""


@task
def double(value: int) -> int:
    return 2 * value


@pytest.fixture(scope="module")
def flow_run_twice(tmp_path_factory) -> list[str]:
    """The printed lines of TWICE: a cached task called twice in a flow, against a temporary server."""
    folder = tmp_path_factory.mktemp("twice")
    result = subprocess.run([sys.executable, "-c", TWICE, str(folder / "cache")], capture_output=True, text=True,
                            env=cli_environment(folder), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()


def test_a_cache_hit_is_still_named_cached(flow_run_twice):
    first, second = json.loads(flow_run_twice[-2])
    assert first == [42, False] and second[0] == 42, CHECKED
    assert second[1], f"a cache hit's state is no longer named 'Cached' {CHECKED}"


def test_a_flow_run_imports_none_of_the_servers_database_models(flow_run_twice):
    """MLflow's SQLite store configures every SQLAlchemy mapper in the process; Prefect's server models imported
    half (a client importing them while MLflow writes) broke it ("failed to locate a name ('FlowRun')"). Against
    a server process, a flow run imports none of them, so OPI does not import them either."""
    imported = json.loads(flow_run_twice[-1])
    assert imported == [], f"Prefect's client imports its server's models {CHECKED}: {imported[:3]}"


def test_a_task_still_refuses_an_unsaved_storage_block_in_its_constructor(tmp_path):
    # if this starts passing, the adapter's post-constructor assignment is no longer needed
    with pytest.raises(TypeError, match="persisted server-side"):
        task(result_storage=CacheFileSystem(basepath=str(tmp_path)))(lambda: None)
    configured = prefect_adapter.with_result_storage(double.with_options(persist_result=True),
                                                     CacheFileSystem(basepath=str(tmp_path)))
    assert isinstance(configured.result_storage, CacheFileSystem)


def test_result_keys_are_recorded_relative_to_the_cache_folder(tmp_path):
    store = ResultStore(result_storage=CacheFileSystem(basepath=str(tmp_path / "results")),
                        metadata_storage=CacheFileSystem(basepath=str(tmp_path / "keys"),
                                                         results=str(tmp_path / "results")))
    store.write(key="entry", obj={"x": 1})
    metadata = (tmp_path / "keys" / "entry").read_bytes()
    assert b'"storage_key":"entry"' in metadata, f"Prefect records another storage key {CHECKED}: {metadata[:200]}"
