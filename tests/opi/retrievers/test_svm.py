"""opi.retrievers.svm: per question, a linear SVM separates the question's raw embedding from the chunks'; chunks
ranked by the decision function, as LangChain's SVMRetriever does."""
import pytest
from langchain_core.embeddings import Embeddings

from opi.retrievers import SVMRetriever
from tests.helpers.chunks import TINY_ARTICLE, TableEmbedder, make_chunks


def test_the_chunk_next_to_the_question_ranks_first_and_the_opposite_one_last():
    embedder = TableEmbedder({"q": [1, 0, 0], "near": [0.9, 0.1, 0], "side": [0, 1, 0], "up": [0, 0, 1],
                              "opposite": [-1, 0.2, 0]})
    (ranking,) = SVMRetriever(embedder=embedder).rank(["q"], make_chunks(["near", "side", "up", "opposite"]), 4)
    assert ranking.chunk_ids[0] == 0 and ranking.chunk_ids[-1] == 3
    assert list(ranking.scores) == sorted(ranking.scores, reverse=True)


def test_c_must_be_positive():
    with pytest.raises(ValueError, match="C must be a finite number > 0, got 0"):
        SVMRetriever(C=0)


class RawVectors(Embeddings):
    """The session embedder's raw (unnormalised) vectors behind LangChain's interface: the index LangChain's
    SVMRetriever builds from ``embed_documents`` is then the vectors ours uses."""

    def __init__(self, embedder):
        self.embedder = embedder

    def embed_documents(self, texts):
        return self.embedder.encode(list(texts), normalize=False).tolist()

    def embed_query(self, text):
        return self.embedder.encode([text], normalize=False)[0].tolist()


def test_svm_is_langchains_svmretriever(tiny_chunks, embedder):
    from langchain_community.retrievers import SVMRetriever as LangChainSVM

    questions = ["Who guided the fishing boats?", "Where was the zirconium kept?", "Who met in the stone hall?",
                 "What heated the schoolroom?", "When did the keeper light the lamp?"]
    theirs = LangChainSVM.from_texts(TINY_ARTICLE, RawVectors(embedder), k=len(TINY_ARTICLE))
    for question, ours in zip(questions, SVMRetriever(embedder=embedder).rank(questions, tiny_chunks, 8)):
        assert ours.chunk_ids == tuple(TINY_ARTICLE.index(d.page_content) for d in theirs.invoke(question)), question


class VectorTable:
    """Seeded vectors around a few centres (an embedder stand-in): texts q0.. and c0.. ."""

    def __init__(self, questions: int, chunks: int, dimension: int = 16, seed: int = 0):
        import numpy as np

        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((8, dimension))
        def around(n):
            return centres[rng.integers(0, 8, n)] + 0.6 * rng.standard_normal((n, dimension))
        self.vectors = {**{f"q{i}": v for i, v in enumerate(around(questions))},
                        **{f"c{i}": v for i, v in enumerate(around(chunks))}}
        self.encoded: list[int] = []

    def encode(self, texts, normalize=True):
        import numpy as np

        self.encoded.append(len(texts))
        vectors = np.stack([self.vectors[t] for t in texts]).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True) if normalize else vectors


def test_candidate_mode_agrees_with_exact_on_a_small_corpus():
    table = VectorTable(30, 400)
    questions, chunks = [f"q{i}" for i in range(30)], make_chunks([f"c{i}" for i in range(400)])
    exact = SVMRetriever(embedder=table).rank(questions, chunks, 4)

    def agreement(candidates):
        approximate = SVMRetriever(embedder=table, candidates=candidates).rank(questions, chunks, 4)
        assert all(len(r.chunk_ids) == 4 for r in approximate)
        return sum(len(set(a.chunk_ids) & set(e.chunk_ids)) for a, e in zip(approximate, exact)) / (4 * 30)

    # with every chunk a candidate it is the exact fit; with fewer, the weighted sample of the rest stands in for
    # them (measured here: 0.54 with 20 of 400 chunks, 0.78 with 100, 0.975 with 200; without the sample, fitted
    # over the candidates alone: 0.40, 0.54, 0.78)
    assert agreement(400) == 1.0
    assert agreement(20) < agreement(100) < agreement(200) < 1.0
    assert agreement(200) >= 0.9
    assert SVMRetriever(candidates=20).label == "SVM (20 candidates)"


def test_an_exact_ranking_estimated_at_hours_is_refused_before_any_chunk_is_embedded():
    from opi.retrievers.base import RetrievalTooSlow

    table = VectorTable(3, 1, dimension=384)
    retriever = SVMRetriever(embedder=table, max_hours=0.001)
    chunks = make_chunks(["c0"] * 20_000)
    with pytest.raises(RetrievalTooSlow, match=r"exact SVM over 20,000 chunks for 3 questions would take about "
                                                r"5 s .*retriever\.candidates=1000.* or max_hours=1 "):
        retriever.rank(["q0", "q1", "q2"], chunks, 4)
    assert table.encoded == [3]  # the questions only: the estimate needs their dimension


def test_a_fit_is_abandoned_within_a_second_when_the_process_stops(process_stop):
    import threading
    import time

    import numpy as np

    from opi.retrievers.svm import fit_interruptibly
    from opi.retrievers.topk import RankingInterrupted

    class SlowModel:
        def fit(self, x, y, sample_weight=None):
            time.sleep(30)  # liblinear does not return to Python until it is done

    threading.Timer(0.3, process_stop.set).start()
    started = time.monotonic()
    with pytest.raises(RankingInterrupted):
        fit_interruptibly(SlowModel(), np.zeros((2, 2)), np.array([1, 0]))
    assert time.monotonic() - started < 1.5


@pytest.mark.slow
def test_sigterm_during_a_long_svm_fit_ends_opi_eval_within_10_s(tmp_path):
    import signal

    from tests.helpers.cli import start_cli, terminated

    # corpus scope over deeplogic-v2's 1,127 chunks, fits made long (a huge C, a tolerance liblinear never meets)
    process, log = start_cli(tmp_path, "setup=svm", "dataset=deeplogic-v2", "retrieval.scope=corpus",
                             "retriever.C=1000", "retriever.tol=1e-15", "retriever.max_iter=1000000000")
    code, took = terminated(process, lambda: "SVM: one fit over 1,127 chunks" in log.read_text(), 600, after=3)
    output = log.read_text()
    assert took < 10, output[-3000:]
    assert code == 128 + signal.SIGTERM, output[-3000:]
