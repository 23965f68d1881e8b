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

print(json.dumps([[state.result(), was_cached(state)] for state in run_flow(run_twice)]))
"""


@task
def double(value: int) -> int:
    return 2 * value


def test_a_cache_hit_is_still_named_cached(tmp_path):
    result = subprocess.run([sys.executable, "-c", TWICE, str(tmp_path / "cache")], capture_output=True, text=True,
                            env=cli_environment(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = json.loads(result.stdout.strip().splitlines()[-1])
    assert first == [42, False] and second[0] == 42, CHECKED
    assert second[1], f"a cache hit's state is no longer named 'Cached' {CHECKED}"


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
