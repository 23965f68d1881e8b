"""The one set of rules for what counts as a secret, and how it is kept out of what OPI writes.

A key lives in an environment variable, and a setting names the variable (``llm.api_key_env=OPENAI_API_KEY``).
``setting_problem`` says why a setting would put a secret into what a run writes (run names, params, Hydra's saved
files, Prefect's database, logs), without repeating it; commands refuse such settings before anything is written:
- a ``*_env`` setting that is not a variable's name (a key pasted where its variable's name belongs);
- a setting whose *name* says it holds a secret (``api_key``, ``token``, ``password`` ...) given a value;
- a URL with credentials in it (``http://user:key@host``, ``?api-key=...``);
- a value that looks like a provider's API key (``sk-...``, ``hf_...``, ``AKIA...``).
Redaction is the second line, for what reaches a log line anyway: ``redact_text`` masks credentials in URLs and
key-looking tokens. Every check and redaction in ``opi`` and ``flows`` goes through these functions.
"""
from __future__ import annotations

import os
import re
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# parts of a setting's or query parameter's name that mark its value as a secret
SECRET_NAME = re.compile(r"(^|[-_])(api[-_]?key|apikey|secret|token|password|passwd|credentials?|auth|authorization|"
                         r"access[-_]?key|sig|signature|key|code)($|[-_])", re.IGNORECASE)
MASK = "***"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# the shapes of common providers' keys: OpenAI and Anthropic (sk-...), Hugging Face, GitHub, Slack, AWS, Google
KEY_LIKE = re.compile(r"(?<![A-Za-z0-9])(?:sk-(?:proj-|ant-|or-|svcacct-)?(?=[A-Za-z0-9_-]*[0-9])"
                      r"(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{20,}|sk-[0-9a-f]{32,}|hf_[A-Za-z0-9]{20,}|"
                      r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
                      r"gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,}|"
                      r"AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})")
# what a variable's name does not look like: 32+ hex digits, or 20+ characters mixing lower case, upper case and
# digits (provider keys without a known prefix: Azure, Mistral, Cohere ...)
RANDOM_LOOKING = re.compile(r"[0-9a-fA-F]{32,}|(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[0-9])"
                            r"[A-Za-z0-9_-]{20,}")
UNSET = (None, "", "null", "None", "???")
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s'\"]+@")  # to the last @ before the path
_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#\s'\"@]*:[^/?#\s'\"]*@")  # user:password@ (a user alone is no secret)
_QUERY_PAIR = re.compile(r"([?&])([^=&\s'\"#]+)=([^&\s'\"#]*)")


def is_secret_name(name: str) -> bool:
    """``name`` (a setting, a dotted key's last part, a query parameter) says its value is a secret."""
    return bool(SECRET_NAME.search(re.split(r"[.\s]", name.strip())[-1]))


def _query_pair(match: re.Match) -> str:
    separator, name, value = match.groups()
    return f"{separator}{name}={MASK if is_secret_name(name) and value else value}"


_KEYS_IN_USE: set[str] = set()  # the keys this process read (``keep_out``): masked wherever they appear


def keep_out(*values: str) -> None:
    """Keys this process uses, whatever their shape: ``redact_text`` masks them (a server may echo one back in an
    error, and an error reaches logs, Prefect's states and the console)."""
    _KEYS_IN_USE.update(v.strip() for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH)


def redact_text(text: str) -> str:
    """``text`` with every key this process uses, every URL's credentials and every key-looking token replaced by
    ``***``."""
    for key in _KEYS_IN_USE:
        if key in text:
            text = text.replace(key, MASK)
    text = KEY_LIKE.sub(MASK, text)
    if "@" not in text and "=" not in text:
        return text
    return _QUERY_PAIR.sub(_query_pair, _USERINFO.sub(rf"\1{MASK}@", text))


def looks_like_key(text: str) -> bool:
    return bool(KEY_LIKE.search(text))


def url_has_credentials(text: str) -> bool:
    """A URL in ``text`` carries a user:password or a secret-named query value."""
    return bool(_PASSWORD.search(text)) or any(is_secret_name(name) and value
                                               for _, name, value in _QUERY_PAIR.findall(text))


def key_variable_setting(name: str) -> str:
    """The setting that names the key's variable for the component ``name`` belongs to: an embedding's own
    (``embedding.api_key_env``, ``retriever.embedding.api_key_env``), else the LLM endpoint's."""
    parts = name.split(".")
    return ".".join(parts[:parts.index("embedding") + 1] + ["api_key_env"]) if "embedding" in parts else \
        "llm.api_key_env"


def setting_problem(name: str, value: Any) -> str | None:
    """Why ``name=value`` would put a secret into what a run writes, in one line that does not repeat the value;
    None when it does not."""
    if isinstance(value, (bool, int, float)) or value is None:
        return None
    if name.split(".")[-1].endswith("_env"):
        if all(v in UNSET or (isinstance(v, str) and ENV_NAME.fullmatch(v.strip()) and not looks_like_key(v)
                              and not RANDOM_LOOKING.fullmatch(v.strip())) for v in swept(value)):
            return None
        return (f"{name} must be the name of an environment variable (letters, digits and _), not its value: put "
                f"the key in a variable (export OPENAI_API_KEY=...) and give its name ({name}=OPENAI_API_KEY)")
    if is_secret_name(name) and value not in UNSET and str(value).lower() not in ("true", "false"):
        return (f"{name} would write a secret into the run's settings and logs: OPI takes no key as a setting; put "
                f"it in an environment variable and name that variable ({key_variable_setting(name)}=OPENAI_API_KEY)")
    if isinstance(value, str) and url_has_credentials(value):
        return (f"{name} holds credentials in its URL (user:password@ or a key in the query), which every log and "
                f"saved config would carry: give the URL without them and the key through {key_variable_setting(name)}")
    if isinstance(value, str) and looks_like_key(value):
        return (f"{name} holds what looks like an API key: OPI takes no key as a setting; put it in an environment "
                f"variable and name that variable ({key_variable_setting(name)}=OPENAI_API_KEY)")
    return None


def swept(value: Any) -> list[Any]:
    """The values of a sweep as typed (``a,b``, ``choice(a,b)``), or the one value."""
    if not isinstance(value, str):
        return [value]
    inner = re.fullmatch(r"\s*choice\((.*)\)\s*", value, flags=re.DOTALL)
    return [v.strip().strip("'\"") for v in (inner.group(1) if inner else value).split(",")]


def settings_problem(settings: Any, prefix: str = "") -> str | None:
    """The first ``setting_problem`` among nested settings (dicts and lists of plain data)."""
    if isinstance(settings, dict):
        for key, value in settings.items():
            problem = settings_problem(value, f"{prefix}{key}.") if isinstance(value, (dict, list)) else \
                setting_problem(f"{prefix}{key}", value)
            if problem:
                return problem
    elif isinstance(settings, list):
        for item in settings:
            problem = settings_problem(item, prefix) if isinstance(item, (dict, list)) else \
                setting_problem(prefix.rstrip("."), item)
            if problem:
                return problem
    return None


MIN_SECRET_LENGTH = 8  # shorter values of key variables are placeholders (EMPTY, none), not keys


def secret_values(named: Iterable[str] = ()) -> dict[str, str]:
    """The keys in this environment, by variable: every variable whose name says it holds a secret
    (``OPENAI_API_KEY``, ``HF_TOKEN`` ...) and those settings name as a key's variable (``named``)."""
    named = set(named)
    return {name: value for name, value in os.environ.items()
            if (name in named or is_secret_name(name)) and len(value.strip()) >= MIN_SECRET_LENGTH}


def resolved_settings_problem(leaves: Iterable[tuple[str, Any, str | None]]) -> str | None:
    """The first setting that would write a secret once resolved, in one line that does not repeat it; ``leaves``
    are (name, value as resolved, its text where it is an interpolation) for every setting. A value holding the key
    of a key's variable (``OPENAI_API_KEY``, ``HF_TOKEN``, one a ``*_env`` setting names), or an interpolation bringing
    in what looks like a key (``${oc.env:ANY_VARIABLE}``, a resolver of your own), is refused, as the same text
    typed in would be."""
    leaves = list(leaves)
    keys = secret_values(v for n, v, _ in leaves if n.split(".")[-1].endswith("_env") and isinstance(v, str))
    keep_out(*keys.values())
    for name, value, text in leaves:
        shown = name if text is None else f"{name} (resolved from its interpolation)"
        brought = {} if text is None else {v: key for v, key in keys_read(text).items() if key not in text}
        variable = next((v for v, key in {**keys, **brought}.items() if isinstance(value, str) and key in value), None)
        if variable is not None:
            return (f"{shown} holds the key in the environment variable {variable}, and every run name, tag and "
                    f"saved config would carry it: no setting may hold a key; settings name a key's variable "
                    f"instead ({key_variable_setting(name)}={variable})")
        problem = setting_problem(name, value) if text is not None else None
        if problem:
            return problem.replace(name, shown, 1)
    return None


def keys_read(text: str) -> dict[str, str]:
    """The variables an interpolation reads (``${oc.env:NAME}``) that hold what looks like a key, by name."""
    values = {name: os.environ.get(name, "") for name in re.findall(r"oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)", text)}
    return {name: value for name, value in values.items() if len(value.strip()) >= MIN_SECRET_LENGTH and (
        looks_like_key(value) or RANDOM_LOOKING.fullmatch(value.strip()))}


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


def url_without_credentials(url: str) -> str:
    """``url`` with its user:password@ and its secret-named query parameters left out: what may name an endpoint
    in a cache key, the same whichever credentials reach it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_name(k)])
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
