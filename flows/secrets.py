"""Credentials written into a URL (``http://user:key@host/v1``, ``?api-key=...``) kept out of everything OPI
writes: log lines (console and files), MLflow params and config.yaml, Hydra's ``.hydra/`` and ``multirun.yaml``,
Prefect's database. The LLM client alone sees the real address."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'\"]+@")
_QUERY_KEY = re.compile(r"([?&](?:api[-_]?key|key|token|access[-_]?token|sig|signature|password)=)[^&\s'\"]+",
                        re.IGNORECASE)


def redact_text(text: str) -> str:
    return _QUERY_KEY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def redact_values(value: Any) -> Any:
    """``value`` (plain data: dicts, lists, strings) with credentials in its strings replaced by ``***``."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_values(v) for v in value)
    return value


def redact_log_records() -> None:
    """Every log record of this process, whoever logs it (Hydra echoing a job's overrides, httpx, OPI), is
    redacted before any handler formats it."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacting", False):
        return

    def factory(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it as usual
            return record
        if "@" in message or "=" in message:
            clean = redact_text(message)
            if clean != message:
                record.msg, record.args = clean, ()
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
