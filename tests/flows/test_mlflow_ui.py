"""The MLflow UI a user opens after a sweep: `mlflow server` on 127.0.0.1, headless Chromium (Debian's package,
driven by Playwright) following the user's paths: from the front page to the sweep's 13 configurations and their
opi_1 (Model training), and to one configuration's per-example traces, a trace's chunks and assessments, and its
comparison with another configuration on the same questions (GenAI). Screenshots are kept under test-artifacts/
(OPI_TEST_ARTIFACTS).
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


def dismiss_popovers(page) -> None:
    """MLflow 3.17's first-visit popovers: "Detect Issues" (Got it) and the MLflow Assistant panel (Close)."""
    for name in ("Got it", "Close"):
        button = page.get_by_role("button", name=name, exact=True)
        if button.count():
            button.first.click()


@pytest.mark.slow
def test_a_user_finds_an_example_s_trace_and_compares_it_with_another_configuration(paper_sweep, mlflow_server,
                                                                                       record_property):
    """The GenAI path the README describes: front page -> opi -> Evaluation runs -> kNN's run -> its traces -> one
    trace: the retriever span's chunks and the bertsim / relation_correct assessments as logged -> "compare to"
    BM25: the same question with both runs' traces."""
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    _, uri, parent, experiment_id, _ = paper_sweep
    client = mlflow.MlflowClient(uri)
    runs = {run.data.tags["opi.setup"]: run
            for run in client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'")}
    knn, bm25 = runs["kNN"], runs["BM25"]
    traces = client.search_traces(locations=[experiment_id], run_id=knn.info.run_id)
    assert len(traces) == 2  # two examples, both traced
    artifacts = Path(os.environ.get("OPI_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1700, "height": 1100})
            page.goto(mlflow_server)  # GenAI view
            page.get_by_role("link", name="opi", exact=True).click()
            page.get_by_text("Evaluation runs", exact=True).first.click()
            dismiss_popovers(page)
            link = page.locator(f"a[href*='/runs/{knn.info.run_id}/']").first  # its row (the link opens a new tab)
            expect(link).to_be_attached(timeout=60_000)
            page.goto(f"{mlflow_server}/{link.get_attribute('href')}")
            expect(page.get_by_text(knn.info.run_name).first).to_be_visible(timeout=60_000)
            dismiss_popovers(page)
            listed = page.get_by_text(re.compile(r"^tr-"))
            expect(listed.first).to_be_visible(timeout=60_000)
            assert sorted(listed.all_inner_texts()) == sorted(t.info.trace_id for t in traces)
            page.screenshot(path=str(artifacts / "mlflow_ui_traces_list.png"), full_page=True)

            trace = traces[0]
            page.get_by_text(trace.info.trace_id, exact=True).click()
            (retriever,) = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
            page.get_by_text(retriever.name, exact=True).first.click()  # the span list: kNN
            chunk = retriever.outputs[0]["page_content"]
            expect(page.get_by_text(chunk[:60]).first).to_be_visible(timeout=30_000)
            page.get_by_text("opi-example", exact=True).first.click()  # the trace's root: its assessments
            page.get_by_role("button", name=re.compile("Assess")).first.click()
            expect(page.get_by_text("bertsim", exact=True).first).to_be_visible(timeout=30_000)
            shown = page.inner_text("body")
            logged = {a.name: a.value for a in trace.info.assessments}
            assert f"bertsim\n{logged['bertsim']:g}" in shown, shown[-2000:]
            assert f"relation_correct\n{logged['relation_correct']}" in shown
            page.screenshot(path=str(artifacts / "mlflow_ui_trace.png"), full_page=True)

            page.goto(f"{mlflow_server}/#/experiments/{experiment_id}/runs/{knn.info.run_id}/traces")
            dismiss_popovers(page)
            page.get_by_text("baseline run").first.click()
            page.get_by_role("option", name=re.compile(re.escape(bm25.info.run_name))).first.click()
            question = trace.data.spans[0].inputs["question"]
            expect(page.get_by_text(question[:50]).first).to_be_visible(timeout=60_000)
            paired = {t.info.trace_id for t in client.search_traces(locations=[experiment_id],
                                                                     run_id=bm25.info.run_id)
                      if t.data.spans[0].inputs["question"] == question}
            (bm25_trace,) = paired  # the same question, traced in BM25's run too
            expect(page.get_by_text(bm25_trace, exact=True)).to_be_visible()
            expect(page.get_by_text(trace.info.trace_id, exact=True)).to_be_visible()
            page.screenshot(path=str(artifacts / "mlflow_ui_compare.png"), full_page=True)
        finally:
            browser.close()
    record_property("screenshots", str(artifacts))
