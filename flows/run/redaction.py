"""Credentials kept out of what other tools write for a run: every log record of the process (Hydra echoing a job's
overrides, httpx, OPI) and the configs Hydra saves (``.hydra/*.yaml``, ``multirun.yaml``). The rules are
``opi.secrets``'s."""
from __future__ import annotations

import logging
from pathlib import Path

from opi.secrets import redact_text


def redact_log_records() -> None:
    """Every log record of this process is redacted before any handler formats it."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacting", False):
        return

    def factory(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it as usual
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[0] is not None:  # its traceback quotes the exception's messages
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return record

    factory.redacting = True
    logging.setLogRecordFactory(factory)


def scrub_files(*paths: Path) -> None:
    """Rewrite files another tool wrote with credentials in them (Hydra's saved configs and overrides)."""
    for path in paths:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        clean = redact_text(text)
        if clean != text:
            partial = path.with_name(f".{path.name}.scrub")
            partial.write_text(clean)
            partial.replace(path)
