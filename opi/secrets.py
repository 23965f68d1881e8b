"""The one set of rules for what counts as a secret, and how it is kept out of what OPI writes.

- A setting whose *name* says it holds a secret (``api_key``, ``token``, ``password`` ...): dropped wherever
  settings are written (MLflow params, ``config.yaml``).
- Credentials written into a URL: the userinfo (``http://user:key@host``) and query values whose name says they are
  secret (``?api-key=...``, ``&sig=...``) become ``***`` in URLs and in any text that contains one (log lines,
  Hydra's saved configs, error messages).

Every redaction in ``opi`` and ``flows`` goes through these functions, so the rules cannot disagree.
"""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# parts of a setting's or query parameter's name that mark its value as a secret
SECRET_NAME = re.compile(r"(^|[-_])(api[-_]?key|apikey|secret|token|password|passwd|credentials?|auth|authorization|"
                         r"access[-_]?key|sig|signature|key|code)($|[-_])", re.IGNORECASE)
MASK = "***"
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s'\"]+@")  # to the last @ before the path
_QUERY_PAIR = re.compile(r"([?&])([^=&\s'\"#]+)=([^&\s'\"#]*)")


def is_secret_name(name: str) -> bool:
    """``name`` (a setting, a dotted key, a query parameter) says its value is a secret."""
    return any(SECRET_NAME.search(part) for part in re.split(r"[.\s]", name) if part)


def _query_pair(match: re.Match) -> str:
    separator, name, value = match.groups()
    return f"{separator}{name}={MASK if is_secret_name(name) and value else value}"


def redact_text(text: str) -> str:
    """``text`` with every URL's credentials replaced by ``***``."""
    if "@" not in text and "=" not in text:
        return text
    return _QUERY_PAIR.sub(_query_pair, _USERINFO.sub(rf"\1{MASK}@", text))


def redact_url(url: str | None) -> str:
    """``url`` fit for a message: credentials replaced by ``***`` (no URL: OpenAI's own endpoint)."""
    if not url:
        return "api.openai.com"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        query = urlencode([(k, MASK if is_secret_name(k) and v else v)
                           for k, v in parse_qsl(query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_values(value: Any) -> Any:
    """Plain data (dicts, lists, strings) with credentials in its strings replaced, and the values of settings
    whose name marks them secret dropped."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items() if not is_secret_name(str(k))}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_values(v) for v in value)
    return value
