"""opi.llm.reader: the extractive reader (the retrieved sentences most like the question, in article order) and the
LLM reader (the sentences and the question to an LLM)."""
import pytest

from opi.llm.prompts import load_prompt
from opi.llm.reader import ExtractiveReader, LLMReader, format_sentences
from tests.helpers.chunks import TableEmbedder

# cosine with the question q: s0 0, s1 0.8, s2 0.995, s3 0.6, s1-again 0.8 (s1's vector)
EMBEDDER = {"q": [1, 0, 0], "s0": [0, 1, 0], "s1": [0.8, 0.6, 0], "s2": [1, 0.1, 0], "s3": [0.6, 0, 0.8],
            "s1-again": [0.8, 0.6, 0], "other q": [0, 1, 0]}


@pytest.mark.parametrize("n, expected", [
    (1, "s2"),
    (2, "s1 s2"),  # the two most similar (s2, s1), in article order
    (3, "s1 s2 s3"),
    (9, "s0 s1 s2 s3"),  # fewer sentences than n: all of them
])
def test_the_extractive_reader_answers_with_the_n_most_similar_sentences_in_article_order(n, expected):
    reader = ExtractiveReader(n_sentences=n, embedder=TableEmbedder(EMBEDDER))
    assert reader.answer(["q"], [["s0", "s1", "s2", "s3"]]) == [expected]


def test_a_tie_goes_to_the_earlier_sentence():
    reader = ExtractiveReader(n_sentences=2, embedder=TableEmbedder(EMBEDDER))
    # s1 and s1-again tie at 0.8 behind s2; the earlier one, s1, is taken
    assert reader.answer(["q"], [["s1-again", "s0", "s2", "s1"]]) == ["s1-again s2"]


def test_each_question_is_answered_from_its_own_sentences_embedded_in_one_call():
    embedder = TableEmbedder(EMBEDDER)
    answers = ExtractiveReader(n_sentences=1, embedder=embedder).answer(["q", "other q", "q"],
                                                                       [["s0", "s2"], ["s0", "s2"], []])
    assert answers == ["s2", "s0", ""]  # no sentences retrieved: an empty answer
    assert embedder.raw_calls == [["q", "other q", "q", "s0", "s2", "s0", "s2"]]


def test_n_sentences_must_be_positive():
    with pytest.raises(ValueError, match="n_sentences must be >= 1, got 0"):
        ExtractiveReader(n_sentences=0)


def test_the_extractive_reader_on_the_real_model(embedder):
    sentences = ["The copper mine closed in 1911.", "Fishing boats returned before storms.",
                 "Children learned to read in a single schoolroom."]
    (answer,) = ExtractiveReader(n_sentences=1, embedder=embedder).answer(["When did the copper mine close?"],
                                                                          [sentences])
    assert answer == "The copper mine closed in 1911."


def test_format_sentences():
    assert format_sentences(["One.", "Two."]) == "- One.\n- Two."
    assert format_sentences([]) == "(no sentences were retrieved)"


class RecordingClient:
    def __init__(self, replies):
        self.replies, self.requests, self.progress = replies, None, None

    def complete_many(self, requests, progress=None):
        self.requests, self.progress = list(requests), progress
        return self.replies


def test_the_llm_reader_asks_with_the_answer_prompt_and_strips_the_replies():
    client = RecordingClient(["  In 1850.\n", "I cannot tell."])
    progress = object()
    answers = LLMReader(client=client).answer(["When did it open?", "Who owned it?"], [["It opened in 1850."], []],
                                              progress)
    assert answers == ["In 1850.", "I cannot tell."]
    first, second = client.requests
    assert first == ([{"role": "user", "content": load_prompt("answer").render(
        sentences="- It opened in 1850.", question="When did it open?")}], None)  # plain text, no reply format
    assert "(no sentences were retrieved)" in second[0][0]["content"] and "Who owned it?" in second[0][0]["content"]
    assert client.progress is progress


def test_the_llm_reader_names_a_missing_prompt_file():
    with pytest.raises(ValueError, match="no prompt named 'missing'"):
        LLMReader(prompt="missing").messages("Q?", ["S."])
