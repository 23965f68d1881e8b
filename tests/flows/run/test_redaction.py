"""Credentials kept out of what other tools write for a run: log records and Hydra's saved configs."""
import logging

from flows.run.redaction import redact_log_records, scrub_files


def test_every_log_record_is_redacted_before_a_handler_sees_it(caplog, monkeypatch):
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())  # restored after the test
    redact_log_records()
    redact_log_records()  # once is enough: a second call adds nothing
    with caplog.at_level(logging.INFO, logger="anyone"):
        logging.getLogger("anyone").info("calling %s", "http://me:sk-1@host/v1?api-key=sk-2")
    assert caplog.records[-1].getMessage() == "calling http://***@host/v1?api-key=***"


def test_hydras_saved_files_are_rewritten_without_credentials(tmp_path):
    saved, clean = tmp_path / "overrides.yaml", tmp_path / "config.yaml"
    saved.write_text("- llm.base_url=http://me:sk-1@host/v1\n")
    clean.write_text("seed: 0\n")
    stamp = clean.stat().st_mtime_ns
    scrub_files(saved, clean, tmp_path / "missing.yaml")
    assert saved.read_text() == "- llm.base_url=http://***@host/v1\n"
    assert clean.stat().st_mtime_ns == stamp  # nothing to hide: left as it is
