"""opi.retrieval: rankings for a set of examples (batched per index, to a depth), the cut to a member's k, the
combination of members' cut rankings, and what the reader is handed."""
from dataclasses import dataclass, field

import numpy as np
import pytest

from opi.articles import corpus_view, prepare_articles
from opi.combine import RankFusion, Retrieved, SentenceUnion, Single
from opi.data import Example
from opi.retrieval import combine, cut, rank_examples, right_article, sentence_texts
from opi.retrievers import Ranking, Retriever

MILL = "The mill opened in 1850. It closed in 1901. The river silted up."
QUAY = "Ships docked at the quay. Sailors sang at night."
EXAMPLES = [Example("m1", MILL, "When did the mill open?", "In 1850."),
            Example("q1", QUAY, "Where did ships dock?", "At the quay."),
            Example("m2", MILL, "Why did it close?", "The river silted up.")]


@dataclass
class Recording(Retriever):
    """Scores a chunk by its length (the longest first) and records what it was asked."""

    name: str = "recording"
    prepared: list = field(default_factory=list)
    scored: list = field(default_factory=list)

    def prepare(self, questions, chunks):
        self.prepared.append((list(questions), [c.text for c in chunks]))

    def score(self, questions, chunks):
        self.scored.append((list(questions), [c.text for c in chunks]))
        return np.array([[len(c.text) for c in chunks] for _ in questions], dtype=float)


@pytest.fixture
def articles():
    return prepare_articles([MILL, QUAY], size=6, overlap=0)  # one chunk per sentence


def test_questions_sharing_an_article_are_ranked_together_and_prepared_once(articles):
    retriever = Recording()
    rankings = rank_examples(retriever, EXAMPLES, articles, depth=2)
    assert retriever.prepared == [(["When did the mill open?", "Where did ships dock?", "Why did it close?"],
                                   [*MILL.replace(". ", ".|").split("|"), *QUAY.replace(". ", ".|").split("|")])]
    assert [questions for questions, _ in retriever.scored] == [["When did the mill open?", "Why did it close?"],
                                                                 ["Where did ships dock?"]]
    # lengths: mill chunks 24, 18, 20 characters; quay chunks 25, 22
    assert rankings == {"m1": Ranking((0, 2), (24.0, 20.0)), "m2": Ranking((0, 2), (24.0, 20.0)),
                        "q1": Ranking((0, 1), (25.0, 22.0))}


def test_over_the_corpus_every_question_is_ranked_in_one_index(articles):
    retriever = Recording()
    rankings = rank_examples(retriever, EXAMPLES, corpus_view(articles), depth=3)
    assert [len(chunks) for _, chunks in retriever.scored] == [5]
    assert [questions for questions, _ in retriever.scored] == [[e.question for e in EXAMPLES]]
    assert rankings["q1"] == Ranking((3, 0, 4), (25.0, 24.0, 22.0))  # corpus ids: the quay's chunks are 3 and 4


def test_cut_keeps_each_rankings_first_k_chunks():
    rankings = {"a": Ranking((3, 1, 2), (0.3, 0.2, 0.1)), "b": Ranking((0,), (1.0,))}
    assert cut(rankings, 2) == {"a": Ranking((3, 1), (0.3, 0.2)), "b": Ranking((0,), (1.0,))}


def test_combine_maps_each_examples_chunks_to_its_own_articles_sentences(articles):
    member = {"m1": Ranking((2, 0), (1.0, 0.5)), "q1": Ranking((1,), (1.0,)), "m2": Ranking((1,), (1.0,))}
    retrieved = combine(Single(), [member], EXAMPLES, articles)
    assert retrieved == {"m1": Retrieved((2, 0), (0, 2)), "q1": Retrieved((1,), (1,)), "m2": Retrieved((1,), (1,))}
    assert sentence_texts(EXAMPLES[0], articles, retrieved["m1"]) == ["The mill opened in 1850.",
                                                                      "The river silted up."]
    assert sentence_texts(EXAMPLES[1], articles, retrieved["q1"]) == ["Sailors sang at night."]


def test_members_cut_to_their_own_k_before_the_combination(articles):
    deep = {"first": {"m1": Ranking((0, 1, 2), (3.0, 2.0, 1.0))}, "second": {"m1": Ranking((2, 1, 0), (3.0, 2.0, 1.0))}}
    members = [cut(deep["first"], 1), cut(deep["second"], 2)]  # member k: 1 and 2
    union = combine(SentenceUnion(members=["first", "second"]), members, EXAMPLES[:1], articles)["m1"]
    assert union == Retrieved((0, 2, 1), (0, 1, 2))
    fused = combine(RankFusion(members=["first", "second"], k=1), members, EXAMPLES[:1], articles)["m1"]
    # chunk 0: 1/61 (first's only chunk); chunk 2: 1/61 (second's first); a tie: chunk 0 appeared first
    assert fused == Retrieved((0,), (0,))


def test_right_article_is_the_share_of_chunks_from_the_examples_own_article(articles):
    view = corpus_view(articles)
    mill = EXAMPLES[0]
    assert right_article(mill, view, Retrieved((0, 3, 2), (0, 3, 2))) == pytest.approx(2 / 3)  # chunk 3 is QUAY's
    assert right_article(mill, view, Retrieved((4,), (4,))) == 0.0
    assert right_article(mill, view, Retrieved((), ())) == 0.0  # nothing retrieved: nothing right
    assert right_article(mill, articles, Retrieved((0, 1), (0, 1))) == 1.0  # within its article: always
