"""Credentials kept out of what other tools write for a run: log records and Hydra's saved configs."""
import io
import logging

from flows.run.redaction import redact_log_records, scrub_files


def test_every_log_record_is_redacted_before_a_handler_sees_it(caplog, monkeypatch):
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())  # restored after the test
    redact_log_records()
    redact_log_records()  # once is enough: a second call adds nothing
    with caplog.at_level(logging.INFO, logger="anyone"):
        logging.getLogger("anyone").info("calling %s", "http://me:sk-1@host/v1?api-key=sk-2")
    assert caplog.records[-1].getMessage() == "calling http://***@host/v1?api-key=***"


def test_a_logged_tracebacks_quoted_key_is_masked(caplog, monkeypatch):
    from opi import secrets

    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())
    monkeypatch.setattr(secrets, "_KEYS_IN_USE", set())
    secrets.keep_out("hunterSECRETS2xyz")
    redact_log_records()
    handler = logging.StreamHandler(stream := io.StringIO())
    logging.getLogger("anyone").addHandler(handler)
    try:
        try:
            raise RuntimeError("Error code: 401 - Incorrect API key provided: Bearer hunterSECRETS2xyz")
        except RuntimeError:
            logging.getLogger("anyone").warning("the call failed", exc_info=True)
    finally:
        logging.getLogger("anyone").removeHandler(handler)
    written = stream.getvalue()
    assert "Incorrect API key provided: Bearer ***" in written and "hunterSECRETS2xyz" not in written


def test_hydras_saved_files_are_rewritten_without_credentials(tmp_path):
    saved, clean = tmp_path / "overrides.yaml", tmp_path / "config.yaml"
    saved.write_text("- llm.base_url=http://me:sk-1@host/v1\n")
    clean.write_text("seed: 0\n")
    stamp = clean.stat().st_mtime_ns
    scrub_files(saved, clean, tmp_path / "missing.yaml")
    assert saved.read_text() == "- llm.base_url=http://***@host/v1\n"
    assert clean.stat().st_mtime_ns == stamp  # nothing to hide: left as it is
