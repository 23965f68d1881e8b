"""The MLflow UI a user opens after a sweep: `mlflow server` on 127.0.0.1, headless Chromium (Debian's package,
driven by Playwright) following the user's paths: from the front page to the sweep's 13 configurations and their
opi_1 (Model training), and to one configuration's per-example traces, a trace's chunks and assessments, and its
comparison with another configuration on the same questions (GenAI); the parent run's page with the sweep's verdict
and ranking, its report.html and report.md opened from the run's Artifacts, the sweep's shared runs view with every
configuration in the charts, and the averages on the Dashboard's Quality tab. Screenshots are kept under test-artifacts/
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
from contextlib import contextmanager
from pathlib import Path

import mlflow
import pandas as pd
import pytest

# the MLflow server and the browser render in seconds with both cores to themselves, so .ci/run runs these with the
# other tests that need the machine alone
pytestmark = pytest.mark.alone

from flows.tracking.notes import with_interval
from opi.relations import load_relation_set
from opi.report import PERFECT, RECALL_ONLY
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
    log = run_cli("flows.cli.evaluate", folder, "experiment=paper_grid", "dataset.limit=2", "classifier.folds=2")
    uri = f"sqlite:///{folder}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    return folder, uri, parent.info.run_id, experiment.experiment_id, log


@pytest.fixture(scope="module")
def mlflow_server(paper_sweep, tmp_path_factory):
    folder, uri = paper_sweep[:2]
    tmp_path = tmp_path_factory.mktemp("mlflow-server")
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
            click(page, page.get_by_text("Model training", exact=True).first)
            click(page, page.get_by_role("link", name="opi", exact=True))
            parent_link = page.get_by_role("link", name=parent_name)
            expect(parent_link).to_be_visible(timeout=60_000)
            close_assistant = page.get_by_role("button", name="Close")
            if close_assistant.count():
                close_assistant.first.click()
            cell = parent_link.locator("xpath=ancestor::div[@role='gridcell']")
            click(page, cell.locator("button[data-component-id*='runnamecellrenderer']"))  # expand the children
            for run in children:  # each named by what varies in the sweep: kNN, A-Four, ...
                expect(page.get_by_role("link", name=run.info.run_name, exact=True)).to_be_visible()
            click(page, page.locator("button", has_text=re.compile(r"^\s*Columns")).first)
            page.get_by_text("opi_1", exact=True).click()
            page.keyboard.press("Escape")
            header = page.get_by_role("columnheader", name="opi_1").first
            header.scroll_into_view_if_needed()
            expect(header).to_be_visible()
            for run in children:
                index = page.get_by_role("link", name=run.info.run_name, exact=True).locator(
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


def click(page, locator, attempts: int = 4) -> None:
    """Click ``locator`` as a user would: a first-visit popover that covers the page when the click comes (it
    appears at a moment that depends on the machine's speed) is dismissed, and the click tried again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        try:
            locator.click(timeout=30_000)  # the UI renders slowly on a loaded machine (CI runs two tests at once)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            dismiss_popovers(page)
            page.keyboard.press("Escape")


def dismiss_popovers(page, wait_ms: int = 0) -> None:
    """MLflow 3.18's first-visit popovers: "Detect Issues" (Got it) and the MLflow Assistant panel (Close);
    ``wait_ms``: how long to wait for the first to appear."""
    if wait_ms:
        try:
            page.get_by_role("button", name="Got it", exact=True).wait_for(timeout=wait_ms)
        except Exception:  # it did not come: nothing to dismiss
            pass
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
            click(page, page.get_by_role("link", name="opi", exact=True))
            click(page, page.get_by_text("Evaluation runs", exact=True).first)
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
            click(page, page.get_by_text(trace.info.trace_id, exact=True))
            drawer = page.get_by_role("dialog")  # the trace, over the run's page (also titled kNN)
            (retriever,) = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
            drawer.get_by_text(retriever.name, exact=True).first.click()  # the span list: kNN
            chunk = retriever.outputs[0]["page_content"]
            expect(page.get_by_text(chunk[:60]).first).to_be_visible(timeout=30_000)
            drawer.get_by_text("opi-example", exact=True).first.click()  # the trace's root: its assessments
            page.get_by_role("button", name=re.compile("Assess")).first.click()
            expect(page.get_by_text("bertsim", exact=True).first).to_be_visible(timeout=30_000)
            shown = page.inner_text("body")
            logged = {a.name: a.value for a in trace.info.assessments}
            assert f"bertsim\n{logged['bertsim']:g}" in shown, shown[-2000:]
            assert f"relation_correct\n{logged['relation_correct']}" in shown
            page.screenshot(path=str(artifacts / "mlflow_ui_trace.png"), full_page=True)

            page.goto(f"{mlflow_server}/#/experiments/{experiment_id}/runs/{knn.info.run_id}/traces")
            dismiss_popovers(page)
            click(page, page.get_by_text("baseline run").first)
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


@contextmanager
def browser_page(width: int, height: int):
    """A page of headless Chromium at ``width`` x ``height``."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def screenshots() -> Path:
    folder = Path(os.environ.get("OPI_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def overall_of(uri: str, parent: str, folder: Path) -> pd.DataFrame:
    """The report's ranking (overall.csv) as the sweep logged it."""
    return pd.read_csv(mlflow.MlflowClient(uri).download_artifacts(parent, "report/overall.csv", str(folder)))


SHOWN = {"opi_1": "OPI-1", "bertsim": "BERTSim", "lrcr": "LRCR"}
# a number as the report shows it: 0.285, 0.285 [0.244, 0.324], 2, 45%, or — for none
NUMBER = re.compile(r"—|-?\d+(\.\d+)?%?( \[-?\d+(\.\d+)?%?, -?\d+(\.\d+)?%?\])?")
VERDICTS = {"", "best", "not distinguishable", "lower", "higher", "ahead", PERFECT, RECALL_ONLY}


def rendered_tables(page) -> list[list[list[str]]]:
    """Every table on the page as rows of cell texts, the header row first."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('table, [role=table]')).map(table =>
        Array.from(table.querySelectorAll('tr, [role=row]')).map(row =>
            Array.from(row.querySelectorAll('th, td, [role=columnheader], [role=cell]')).map(cell =>
                cell.innerText.trim())))""")


def check_table(rows: list[list[str]], names: set[str], relations: set[str]) -> None:
    """Every row has a cell under each header, and each cell is what its header says: a configuration, a relation,
    a verdict, or a number."""
    header = rows[0]
    for row in rows[1:]:
        assert len(row) == len(header), (header, row)
        for title, cell in zip(header, row):
            if title in ("configuration", "best", "runner-up"):
                assert cell in names, (title, cell, header)
            elif title == "relation":
                assert cell in relations, (title, cell)
            elif title in ("vs best", "verdict"):
                assert cell in VERDICTS, (title, cell)
            elif title != "note":
                assert NUMBER.fullmatch(cell), (title, cell, header)


def check_ranking(tables: list[list[list[str]]], overall: pd.DataFrame) -> None:
    """The ranking table (# | configuration | OPI-1 | ...) holds the report's computed values, in its order: each of
    OPI-1, BERTSim and LRCR it shows."""
    (ranking,) = [t for t in tables if t and t[0][:2] == ["#", "configuration"]][:1]
    header = ranking[0]
    assert [row[1] for row in ranking[1:]] == list(overall["configuration"]) and "OPI-1" in header
    for row, expected in zip(ranking[1:], overall.to_dict("records")):
        for metric, title in [(m, t) for m, t in SHOWN.items() if t in header]:
            assert row[header.index(title)] == with_interval(expected[metric], expected[f"{metric}_ci_low"],
                                                             expected[f"{metric}_ci_high"]), (title, row)


def open_artifact(page, server: str, experiment_id: str, parent: str, name: str) -> None:
    """The parent run's Artifacts tab, the report folder, then ``name``, as a user clicks."""
    page.goto(f"{server}/#/experiments/{experiment_id}/runs/{parent}/artifacts")
    click(page, page.get_by_text("report", exact=True).first)
    dismiss_popovers(page)
    click(page, page.get_by_text(name, exact=True).first)


@pytest.mark.slow
def test_the_parent_run_page_shows_the_sweeps_verdict_and_ranking(paper_sweep, mlflow_server, tmp_path):
    from playwright.sync_api import expect

    _, uri, parent, experiment_id, _ = paper_sweep
    note = mlflow.MlflowClient(uri).get_run(parent).data.tags["mlflow.note.content"]
    verdict = next(line for line in note.splitlines() if line.startswith("Best by")).replace("**", "")
    with browser_page(1400, 1100) as page:
        page.goto(f"{mlflow_server}/#/experiments/{experiment_id}/runs/{parent}")
        expect(page.get_by_text("Description", exact=True).first).to_be_visible(timeout=60_000)
        dismiss_popovers(page)
        more = page.get_by_text("Show more", exact=True)
        if more.count():
            click(page, more.first)
        expect(page.get_by_text(verdict).first).to_be_visible()
        check_ranking(rendered_tables(page), overall_of(uri, parent, tmp_path))
        page.screenshot(path=str(screenshots() / "mlflow_ui_parent_run.png"), full_page=True)


@pytest.mark.slow
def test_report_html_opened_from_the_artifact_view_shows_both_images(paper_sweep, mlflow_server, tmp_path):
    _, uri, parent, experiment_id, _ = paper_sweep
    with browser_page(1700, 1100) as page:
        open_artifact(page, mlflow_server, experiment_id, parent, "report.html")
        frame = page.frame_locator("iframe").first
        frame.locator("h1").first.wait_for(timeout=60_000)  # MLflow renders the file in a sandboxed iframe
        images = frame.locator("body").evaluate(
            "b => Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])")
        assert len(images) == 2 and all(shown for _, shown in images), images  # bars and heatmap, both drawn
        page.screenshot(path=str(screenshots() / "mlflow_ui_report_html.png"), full_page=True)


@pytest.mark.slow
def test_report_html_fits_a_1280_px_page_and_its_verdict_is_short(paper_sweep, tmp_path):
    """The report as a file at 1,280 px: nothing wider than the page; the verdict in at most 80 words."""
    _, uri, parent, _, _ = paper_sweep
    html = Path(mlflow.MlflowClient(uri).download_artifacts(parent, "report/report.html", str(tmp_path)))
    with browser_page(1280, 900) as page:
        page.goto(html.as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        widest = page.evaluate("Math.max(...Array.from(document.querySelectorAll('table')).map(t => "
                               "t.getBoundingClientRect().right))")
        assert widest <= 1280
        verdict = page.locator("h2", has_text="Verdict")
        words = verdict.evaluate("""h => { let text = [], e = h.nextElementSibling;
            while (e && e.tagName !== 'H2') { text.push(e.innerText); e = e.nextElementSibling; }
            return text.join(' '); }""")
        assert len(words.split()) <= 80, words
        verdict.locator("xpath=..").screenshot(path=str(screenshots() / "report_verdict.png"))
        page.locator("table").first.screenshot(path=str(screenshots() / "report_overall_table.png"))


@pytest.mark.slow
def test_report_md_in_the_artifact_preview_puts_every_number_under_its_header(paper_sweep, mlflow_server, tmp_path):
    from playwright.sync_api import expect

    _, uri, parent, experiment_id, _ = paper_sweep
    client = mlflow.MlflowClient(uri)
    names = {run.info.run_name for run in client.search_runs([experiment_id],
                                                             f"tags.mlflow.parentRunId = '{parent}'")}
    with browser_page(1700, 1100) as page:
        open_artifact(page, mlflow_server, experiment_id, parent, "report.md")
        expect(page.get_by_role("table").first).to_be_visible(timeout=60_000)
        tables = rendered_tables(page)
        assert len(tables) >= 5
        for rows in tables:
            check_table(rows, names, set(load_relation_set().labels))
        check_ranking(tables, overall_of(uri, parent, tmp_path))
        page.screenshot(path=str(screenshots() / "mlflow_ui_report_md.png"), full_page=True)


@pytest.mark.slow
def test_the_sweeps_shared_view_charts_every_configuration(paper_sweep, mlflow_server):
    """The sweep's runs view (saved with the sweep): every child listed and in the charts, not MLflow's first 10."""
    from playwright.sync_api import expect

    _, uri, parent, experiment_id, _ = paper_sweep
    children = mlflow.MlflowClient(uri).search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    with browser_page(1700, 1100) as page:
        page.goto(f"{mlflow_server}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
                  f"&viewStateShareKey={parent}")
        for run in children:
            expect(page.get_by_role("link", name=run.info.run_name, exact=True)).to_be_visible(timeout=60_000)
        dismiss_popovers(page)
        click(page, page.locator("label:has(input[value=CHART])"))
        page.get_by_placeholder("Search metric charts").fill("opi_1")
        card = page.get_by_test_id("experiment-view-compare-runs-card").filter(
            has=page.get_by_text("opi_1", exact=True))
        expect(card.locator(".barlayer .point")).to_have_count(len(children), timeout=60_000)
        page.screenshot(path=str(screenshots() / "mlflow_ui_sweep_charts.png"), full_page=True)


@pytest.mark.slow
def test_the_quality_tab_averages_relation_correct(paper_sweep, mlflow_server):
    """The README's path: front page -> opi -> Dashboard -> Quality: relation_correct's count and average are the
    traces' as logged."""
    from playwright.sync_api import expect

    _, uri, _, experiment_id, _ = paper_sweep
    traces = mlflow.MlflowClient(uri).search_traces(locations=[experiment_id], max_results=1000)
    correct = [a.value for t in traces for a in t.info.assessments if a.name == "relation_correct"]
    with browser_page(1700, 1100) as page:
        page.goto(mlflow_server)
        click(page, page.get_by_role("link", name="opi", exact=True))
        click(page, page.get_by_role("link", name="Dashboard", exact=True))  # left, under Observability
        dismiss_popovers(page, wait_ms=30_000)  # "Detect Issues" covers the dashboard on a first visit
        click(page, page.get_by_role("tab", name="Quality", exact=True))
        expect(page.get_by_text("Quality Summary")).to_be_visible(timeout=60_000)
        expect(page.get_by_role("button", name="relation_correct", exact=True).first).to_be_visible(timeout=60_000)
        summary = page.inner_text("body").split("Quality Summary", 1)[1]  # scorer, total count, average value
        found = re.search(r"relation_correct\s+(\d+)\s+(\d+\.\d+)", summary)
        assert found and found.groups() == (str(len(correct)), f"{sum(correct) / len(correct):.2f}"), summary[:500]
        page.screenshot(path=str(screenshots() / "mlflow_ui_quality.png"), full_page=True)
