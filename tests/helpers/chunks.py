"""Hand-made chunks and a table embedder: retrieval and combination rules checked exactly."""
import numpy as np

from opi.chunking import Chunk


def make_chunks(texts: list[str]) -> list[Chunk]:
    """One chunk per text, chunk i holding sentence i."""
    chunks, offset = [], 0
    for idx, text in enumerate(texts):
        chunks.append(Chunk("doc", idx, text, offset, offset + len(text), (idx,)))
        offset += len(text) + 1
    return chunks


class TableEmbedder:
    """Hand-set vectors, so that scoring rules can be checked exactly. ``raw`` is the un-normalised view (as
    ``SentenceEmbedder.raw``); every call of it is recorded in ``raw_calls``."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = {k: np.asarray(v, dtype=float) for k, v in table.items()}
        self.raw_calls: list[list[str]] = []

    def raw(self, texts):
        self.raw_calls.append(list(texts))
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, 2))

    def encode(self, texts, normalize=True):
        vectors = np.stack([self.table[t] for t in texts])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True) if normalize else vectors


TINY_ARTICLE = [
    "The lighthouse keeper lit the lamp every evening at dusk, climbing ninety steps to the lantern room.",
    "The lighthouse keeper lit the lamp each evening at dusk, climbing the ninety steps up to the lantern room.",
    "Fishing boats returned to the harbour before storms, guided by the beam that swept the bay.",
    "The copper mine closed.",
    "Miners from the valley walked to the copper mine before sunrise, and the copper mine paid them weekly in "
    "silver coins minted in the capital, which the families spent at the market on Saturdays and saved for winter.",
    "A shipment of zirconium sand arrived in spring and was stored in the old customs shed by the quay.",
    "The town council met monthly in the stone hall to settle disputes about grazing rights and roads.",
    "Children learned to read in a single schoolroom heated by a stove that burned driftwood.",
]
