"""The MLflow UI a user opens after a sweep: `mlflow server` on 127.0.0.1, headless Chromium (Debian's package,
driven by Playwright) following the user's path from the front page to the sweep's 13 configurations and their
opi_1. The screenshot is kept under test-artifacts/ (OPI_TEST_ARTIFACTS) and named in the test's output.
.ci/run installs Chromium and sets OPI_REQUIRE_BROWSER=1, so there a missing browser fails the test instead of
skipping it."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest

from tests.helpers.cli import free_port, run_cli
from tests.helpers.paths import ROOT


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


@pytest.fixture(scope="module")
def paper_sweep(tmp_path_factory):
    """The paper grid (13 configurations) on two bundled examples, and the log its sweep printed."""
    folder = tmp_path_factory.mktemp("paper-sweep")
    log = run_cli("flows.cli.evaluate", folder, "experiment=paper_grid", "dataset.limit=2", "classifier.folds=2",
                  "report.enabled=false")
    uri = f"sqlite:///{folder}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    return folder, uri, parent.info.run_id, experiment.experiment_id, log


@pytest.fixture
def mlflow_server(paper_sweep, tmp_path):
    folder, uri = paper_sweep[:2]
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


@pytest.mark.slow
def test_a_user_finds_the_sweep_from_the_front_page(paper_sweep, mlflow_server, record_property):
    """The path the README describes: front page, the 'Model training' switch, the experiment, the parent's +,
    the 13 configurations, Columns -> opi_1; and the address the sweep printed opens the same runs."""
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    _, uri, parent, experiment_id, log = paper_sweep
    client = mlflow.MlflowClient(uri)
    parent_name = client.get_run(parent).info.run_name
    children = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 13
    printed = re.search(r"then (http://127\.0\.0\.1:5000/\S+)", log).group(1)
    artifacts = Path(os.environ.get("OPI_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    screenshot = artifacts / "mlflow_ui_sweep.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1700, "height": 1100})
            page.goto(mlflow_server)  # the front page: MLflow 3 starts in its GenAI view
            page.get_by_text("Model training", exact=True).first.click()
            page.get_by_role("link", name="opi", exact=True).click()
            parent_link = page.get_by_role("link", name=parent_name)
            expect(parent_link).to_be_visible(timeout=60_000)
            close_assistant = page.get_by_role("button", name="Close")
            if close_assistant.count():
                close_assistant.first.click()
            cell = parent_link.locator("xpath=ancestor::div[@role='gridcell']")
            cell.locator("button[data-component-id*='runnamecellrenderer']").click()  # expand the children
            for run in children:
                expect(page.get_by_role("link", name=run.info.run_name)).to_be_visible()
            page.locator("button", has_text=re.compile(r"^\s*Columns")).first.click()
            page.get_by_text("opi_1", exact=True).click()
            page.keyboard.press("Escape")
            header = page.get_by_role("columnheader", name="opi_1").first
            header.scroll_into_view_if_needed()
            expect(header).to_be_visible()
            for run in children:
                index = page.get_by_role("link", name=run.info.run_name).locator(
                    "xpath=ancestor::div[@role='row']").get_attribute("row-index")
                row = page.locator(f".ag-center-cols-container .ag-row[row-index='{index}']")
                value = run.data.metrics["opi_1"]
                shown = [float(t) for t in row.inner_text().split() if re.fullmatch(r"\d+(\.\d+)?", t)]
                assert any(abs(v - value) < 1e-4 for v in shown), (run.info.run_name, value, shown)  # as logged
            page.screenshot(path=str(screenshot), full_page=True)
            page.goto(printed.replace("http://127.0.0.1:5000", mlflow_server))  # the address the sweep printed
            expect(page.get_by_role("link", name=parent_name)).to_be_visible(timeout=60_000)
            expect(page.get_by_text(f"{len(children) + 1} matching runs")).to_be_visible()
        finally:
            browser.close()
    assert screenshot.stat().st_size > 10_000
    record_property("screenshot", str(screenshot))
    print(f"\nscreenshot of the MLflow UI: {screenshot}")
