"""A user's own retriever, defined outside OPI: it returns an article's first chunks (skipping ``skip``)."""
from dataclasses import dataclass

from opi.classify import RelationClassifier
from opi.llm.reader import Reader
from opi.retrievers import Ranking, Retriever


@dataclass
class LeadRetriever(Retriever):
    name: str = "Lead"
    skip: int = 0

    def rank(self, questions, chunks):
        ids = tuple(range(self.skip, min(self.skip + self.k, len(chunks))))
        return [Ranking(ids, tuple(1.0 / (1 + i) for i in range(len(ids)))) for _ in questions]


@dataclass
class FirstSentenceReader(Reader):
    """A user's own reader: answers with the first retrieved sentence."""

    def answer(self, questions, sentence_lists, progress=None):
        return [sentences[0] if sentences else "" for sentences in sentence_lists]


@dataclass
class OneRelationClassifier(RelationClassifier):
    """A user's own relation classifier that learns nothing: names one relation for every answer."""

    relation: str = "direct_matching"

    def predict(self, triples, progress=None):
        return [self.relation for _ in triples]


@dataclass
class PlainReader:
    """A reader that does not subclass ``opi.llm.reader.Reader`` (which declares what the run reads of a reader)."""

    def answer(self, questions, sentence_lists, progress=None):
        return list(questions)
