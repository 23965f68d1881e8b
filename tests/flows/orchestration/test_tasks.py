"""The stage tasks as plain functions: a ranking to a depth, served to every k; the classifier fitted once per
process for the same settings and data."""
from flows.orchestration import tasks
from flows.orchestration.hashing import hashed
from flows.orchestration.tasks import StageContext
from opi.articles import prepare_articles
from opi.classify import RelationClassifier, TrainingSet
from opi.data import Example
from opi.relations import Triple
from opi.retrievers import BM25Retriever
from opi.schemas import EmbeddingConfig

ARTICLE = " ".join(f"Sentence {i} names the harbour keeper number {i}." for i in range(40))


def test_rank_returns_each_examples_ranking_to_the_depth_asked():
    articles = prepare_articles([ARTICLE], size=20, overlap=4)
    examples = [Example("a", ARTICLE, "Who is keeper number 7?", "7"), Example("b", ARTICLE, "Who is keeper 30?", "30")]
    rankings = tasks.rank.fn(BM25Retriever(k=2), 6, examples, articles, EmbeddingConfig())
    assert sorted(rankings) == ["a", "b"] and {len(r.chunk_ids) for r in rankings.values()} == {6}
    again = tasks.rank.fn(BM25Retriever(k=8), 2, examples, articles, EmbeddingConfig())
    assert again["a"].chunk_ids == rankings["a"].top(2).chunk_ids  # the shallow ranking is the deep one's prefix


class Recording(RelationClassifier):
    """A classifier that learns: counts its fits and names every triple by its answer."""

    trains = True
    fits = 0

    def fit(self, triples, labels):
        Recording.fits += 1
        return self

    def predict(self, triples, progress=None):
        return [t.answer for t in triples]


def test_a_classifier_is_fitted_once_for_every_configuration_of_a_sweep():
    triples = hashed([Triple("text", f"q{i}", ["causal", "temporal"][i % 2]) for i in range(10)])
    training = TrainingSet([f"e{i}" for i in range(10)], triples, [t.answer for t in triples], cross_fit=False)
    context = StageContext(EmbeddingConfig(), "paper13", 0, "unused.sqlite")
    Recording.fits = 0
    for _ in range(3):  # three configurations' answers
        result = tasks.classify.fn(Recording(), None, training, ["x"], [Triple("t", "q", "causal")], context)
        assert result.predicted == ["causal"]
    assert Recording.fits == 1


def test_a_blank_answer_matches_nothing_and_a_missing_one_is_not_scored():
    from flows.tracking.scorers import similarity

    gold = ["The keeper is Tom.", "The keeper is Ann.", "The keeper is Bob."]
    scored = tasks.answer_similarity.fn(gold, ["Tom keeps it.", "  ", None], EmbeddingConfig())
    assert scored[0] > 0.5 and scored[1] == 0.0 and scored[2] != scored[2]  # NaN: no answer at all
    assert similarity(gold[1], "", EmbeddingConfig()) == 0.0  # the MLflow scorer agrees
    assert tasks.answer_similarity.fn(gold[:1], [""], EmbeddingConfig()) == [0.0]  # nothing to embed
