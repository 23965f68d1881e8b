"""The MLflow UI a user opens after a sweep: `mlflow server` on 127.0.0.1, the experiment page in headless Chromium
(Debian's package, driven by Playwright), the child runs and their opi_1 column on screen. The screenshot is kept
under test-artifacts/ (OPI_TEST_ARTIFACTS). .ci/run installs Chromium and sets OPI_REQUIRE_BROWSER=1, so there a
missing browser fails the test instead of skipping it."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        message = "needs Debian's chromium (apt-get install chromium) and playwright (the dev extra)"
        if os.environ.get("OPI_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(finished_sweep, tmp_path):
    folder, uri, _, _ = finished_sweep
    port = free_port()
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    log = open(tmp_path / "mlflow-server.log", "w")
    server = subprocess.Popen([str(mlflow_cli), "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT,
                              cwd=folder, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "mlflow server did not answer /health in 90 s"
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()


def test_experiment_page_shows_child_runs_and_opi_1(finished_sweep, mlflow_server):
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    _, uri, parent, experiment_id = finished_sweep
    import mlflow

    parent_name = mlflow.MlflowClient(uri).get_run(parent).info.run_name
    artifacts = Path(os.environ.get("OPI_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{mlflow_server}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
            parent_link = page.get_by_role("link", name=parent_name)
            expect(parent_link).to_be_visible(timeout=60_000)
            close_assistant = page.get_by_role("button", name="Close")
            if close_assistant.count():
                close_assistant.first.click()
            cell = parent_link.locator("xpath=ancestor::div[@role='gridcell']")
            cell.locator("button[data-component-id*='runnamecellrenderer']").click()  # expand the children
            for child in ("kNN | extractive | local-clf", "BM25 | extractive | local-clf"):
                expect(page.get_by_role("link", name=child)).to_be_visible()
            page.get_by_role("button", name="Columns").click()
            page.get_by_text("opi_1", exact=True).click()
            page.keyboard.press("Escape")
            header = page.get_by_role("columnheader", name="opi_1").first
            header.scroll_into_view_if_needed()
            expect(header).to_be_visible()
            client = mlflow.MlflowClient(uri)
            for run in client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'"):
                index = page.get_by_role("link", name=run.info.run_name).locator(
                    "xpath=ancestor::div[@role='row']").get_attribute("row-index")
                row = page.locator(f".ag-center-cols-container .ag-row[row-index='{index}']")
                assert str(run.data.metrics["opi_1"])[:6] in row.inner_text()  # the value, as logged
            page.screenshot(path=str(artifacts / "mlflow_ui_experiment.png"))
        finally:
            browser.close()
    assert (artifacts / "mlflow_ui_experiment.png").stat().st_size > 10_000
