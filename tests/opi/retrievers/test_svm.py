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
    with pytest.raises(ValueError, match="C must be > 0, got 0"):
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
