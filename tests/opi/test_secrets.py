"""opi.secrets: which names mark a secret, and credentials kept out of URLs, text and written settings."""
import pytest

from opi.secrets import MASK, is_secret_name, redact_text, redact_url, redact_values, setting_problem, settings_problem


@pytest.mark.parametrize("name", ["api_key", "apikey", "api-key", "OPENAI_API_KEY", "llm.api_key", "token",
                                  "auth_token", "password", "db.passwd", "client_secret", "sig", "X-Amz-Signature",
                                  "credentials", "credential_file", "Authorization", "access_key", "key", "code"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["tokens_per_minute", "max_tokens", "author", "keyboard", "monkey", "model",
                                  "llm.base_url", "signal", "passage", "encode", "deployment", ""])
def test_names_that_only_look_like_secrets(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("url, redacted", [
    ("http://user:secret@host/v1", "http://***@host/v1"),
    ("https://sk-abc123@gateway.example.com:8443/openai/v1", "https://***@gateway.example.com:8443/openai/v1"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("https://host/v1?api-key=s3cr3t&deployment=gpt", "https://host/v1?api-key=***&deployment=gpt"),
    ("https://host/v1?sig=abc&sv=2024", "https://host/v1?sig=***&sv=2024"),
    ("https://host/v1?token=", "https://host/v1?token="),  # nothing to hide
    (None, "api.openai.com"),
    ("", "api.openai.com"),
])
def test_redact_url(url, redacted):
    assert redact_url(url) == redacted


def test_redact_url_hides_a_password_holding_an_at_sign():
    assert redact_url("http://me:p@ss@host/v1") == "http://***@host/v1"


def test_redact_url_of_an_unparseable_url_says_so():
    assert redact_url("http://[::1/v1") == "<unparseable URL>"


def test_redact_text_hides_the_credentials_of_every_url_in_a_line():
    line = ("retry 1 of 6 for http://user:pw@a.example/v1 and https://b.example/v1?key=k1&model=gpt and "
            "'https://c.example/?x=1&password=hunter2'")
    assert redact_text(line) == ("retry 1 of 6 for http://***@a.example/v1 and https://b.example/v1?key=***&model=gpt "
                                 "and 'https://c.example/?x=1&password=***'")
    assert redact_text("no url here: 42 tokens") == "no url here: 42 tokens"
    assert redact_text("max_tokens=256 and ?max_tokens=256") == "max_tokens=256 and ?max_tokens=256"


def test_redact_text_and_redact_url_agree_on_a_password_holding_an_at_sign():
    assert redact_text("calling http://me:p@ss@host/v1") == "calling " + redact_url("http://me:p@ss@host/v1")


def test_redact_values_drops_secret_settings_and_redacts_strings_all_the_way_down():
    settings = {"llm": {"model": "gpt", "api_key": "sk-1", "base_url": "http://u:p@h/v1",
                        "headers": [{"token": "t"}, "https://h/?sig=s"], "max_tokens": 256},
                "seeds": (1, 2), "password": None}
    assert redact_values(settings) == {"llm": {"model": "gpt", "base_url": f"http://{MASK}@h/v1",
                                               "headers": [{}, f"https://h/?sig={MASK}"], "max_tokens": 256},
                                       "seeds": (1, 2)}


@pytest.mark.parametrize("name, value, says", [
    ("llm.api_key_env", "sk-proj-abcdefghijklmnopqrstuv", "must be the name of an environment variable"),
    ("llm.api_key_env", "my key", "must be the name of an environment variable"),
    ("llm.api_key", "sk-1", "would write a secret into the run's settings"),
    ("llm.token", "abc", "would write a secret"),
    ("llm.base_url", "http://me:pw@gateway/v1", "holds credentials in its URL"),
    ("llm.base_url", "https://gateway/v1?api-key=abc", "holds credentials in its URL"),
    ("tracking.label", "hf_abcdefghijklmnopqrstuvwxyz", "looks like an API key"),
    # keys that are valid variable names still are keys: known prefixes, long hex, mixed-case random strings
    ("llm.api_key_env", "hf_" + "a" * 34, "must be the name of an environment variable"),
    ("llm.api_key_env", "AKIAIOSFODNN7EXAMPLE", "must be the name of an environment variable"),
    ("llm.api_key_env", "gsk_" + "aB3" * 10, "must be the name of an environment variable"),
    ("llm.api_key_env", "3f9c" + "a1b2" * 8, "must be the name of an environment variable"),
    ("llm.api_key_env", "Ab3dEf9hIjKlMn0pQrStUv12", "must be the name of an environment variable"),
    ("tracking.label", "sk-" + "0a" * 16, "looks like an API key"),  # DeepSeek-style hex
])
def test_a_setting_that_would_write_a_secret_is_named_without_its_value(name, value, says):
    problem = setting_problem(name, value)
    assert says in problem and value not in problem and name in problem


@pytest.mark.parametrize("name, where", [
    ("embedding.base_url", "embedding.api_key_env"), ("retriever.embedding.base_url", "retriever.embedding.api_key_env"),
    ("llm.base_url", "llm.api_key_env"), ("tracking.label", "llm.api_key_env")])
def test_a_key_in_a_setting_is_sent_to_its_own_component_s_key_variable(name, where):
    # a key in embedding.base_url was told to use llm.api_key_env, which the embedding endpoint does not read
    assert f"the key through {where}" in setting_problem(name, "https://me:pw@gateway/v1")
    assert f"({where}=OPENAI_API_KEY)" in setting_problem(name, "hf_abcdefghijklmnopqrstuvwxyz")


@pytest.mark.parametrize("name, value", [
    ("llm.api_key_env", "MY_GATEWAY_KEY"), ("llm.api_key_env", None), ("llm.api_key_env", "null"),
    ("llm.api_key_env", "KEY_A,KEY_B"),  # a sweep over two variables
    ("classifier.registered", "models:/opi-relation-classifier@candidate"), ("nightly", "0123456789abcdef" * 2),
    ("dataset.path", "/data/sk-archive/rag12000/test.parquet"), ("llm.base_url", "http://127.0.0.1:8000/v1"),
    ("llm.max_tokens", 256), ("llm.tokens_per_minute", 30000), ("tracking.label", "nightly-0123456789ab"),
    ("llm.password", None), ("llm.model", "ft:gpt-4o-2024-08-06:org::abc123"),
    ("llm.api_key_env", "choice(KEY_A,KEY_B)"), ("llm.api_key_env", "AZURE_OPENAI_API_KEY_2"),
    ("llm.model", "sk-learn-tfidf-baseline"), ("dataset.path", "/data/sk-archive-2024-rag12000/test.parquet"),
    ("tracking.tracking_uri", "postgresql://mlflow@db/mlflow"),  # a user without a password (.pgpass)
    ("retrievers.key_bert.k", 4), ("retriever.use_auth", False), ("retriever.use_auth", "false"),
])
def test_run_ids_model_uris_paths_and_names_are_no_secret(name, value):
    assert setting_problem(name, value) is None


def test_settings_problem_finds_a_secret_anywhere_in_nested_settings():
    assert settings_problem({"llm": {"model": "x", "headers": [{"authorization": "Bearer abc"}]}}).startswith(
        "llm.headers.authorization would write a secret")
    assert settings_problem({"dataset": {"columns": {"context": "passage"}}, "seed": 0}) is None


def test_redact_text_masks_what_looks_like_a_key_in_any_line():
    assert redact_text("401 for key sk-Abcdefghij0123456789klmnop.") == "401 for key ***."
    assert redact_text("run 0123456789abcdef0123456789abcdef") == "run 0123456789abcdef0123456789abcdef"


def test_a_key_in_use_is_masked_whatever_its_shape_and_a_placeholder_is_not(monkeypatch):
    from opi import secrets

    monkeypatch.setattr(secrets, "_KEYS_IN_USE", set())
    secrets.keep_out("hunterSECRETS2xyz", "EMPTY", None)
    assert redact_text("bad request from Bearer hunterSECRETS2xyz") == "bad request from Bearer ***"
    assert redact_text("EMPTY is no key") == "EMPTY is no key"  # under 8 characters: a placeholder


def test_an_llm_error_quoting_a_server_that_echoed_the_key_is_masked(monkeypatch):
    from opi import secrets
    from opi.llm.client import api_key
    from opi.llm.faults import LLMError
    from opi.schemas import LLMConfig

    monkeypatch.setattr(secrets, "_KEYS_IN_USE", set())
    monkeypatch.setenv("TEAM_VAR", "0123456789abcdef0123456789abcdef")  # a name that says nothing: the setting does
    assert api_key(LLMConfig(api_key_env="TEAM_VAR")) == "0123456789abcdef0123456789abcdef"
    error = LLMError("refused: 400 (key 0123456789abcdef0123456789abcdef is not valid here)")
    assert str(error) == "refused: 400 (key *** is not valid here)"
