"""opi.classify: the local relation classifier (embeddings -> a linear model), cross-fitting (no example labelled
by a model that saw it), the LLM relation classifier and its reply parsing, and the training warnings."""
import random
import subprocess
import sys

import pytest

from opi.classify import (CrossFitted, LLMRelationClassifier, LocalRelationClassifier, Triple, fold_of,
                          parse_relation, relation_pipeline, training_warnings)
from opi.llm.client import ChatClient
from opi.llm.prompts import load_prompt
from opi.relations import UNKNOWN, RelationSet, load_relation_set
from opi.schemas import LLMConfig
from tests.helpers.fake_openai import FakeOpenAI


# --- cross-fitting ---------------------------------------------------------------------------------------------

class Recording:
    """A classifier that remembers what it was fitted on and labels every triple with its own number."""

    def __init__(self, made: list):
        self.number, self.seen = len(made), set()
        made.append(self)

    def fit(self, triples, labels):
        self.seen = {t.question for t in triples}  # the question carries the example id
        return self

    def predict(self, triples, progress=None):
        return [f"model {self.number}" for _ in triples]


def pool(ids):
    return [Triple("text", i, "answer") for i in ids], [random.Random(i).choice(["r1", "r2"]) for i in ids]


IDS = [f"ex-{i}" for i in range(40)]


def labellers(ids, apply_ids, folds=5):
    """For each applied id, the set of example ids the model that labelled it was fitted on."""
    made = []
    triples, labels = pool(ids)
    fitted = CrossFitted(lambda: Recording(made), ids, triples, labels, folds)
    predicted = fitted.predict(apply_ids, [Triple("", i, "") for i in apply_ids])
    assert len(made) == folds and all(isinstance(m, Recording) for m in fitted.models.values())
    return {i: made[int(p.split()[1])].seen for i, p in zip(apply_ids, predicted)}


def test_no_example_is_labelled_by_a_model_that_saw_it():
    seen_by_labeller = labellers(IDS, IDS)
    for example_id, seen in seen_by_labeller.items():
        assert example_id not in seen, example_id
        held_out = set(IDS) - seen  # the labeller's fold: every id it did not see, the same fold of the hash
        assert {fold_of(i, 5) for i in held_out} == {fold_of(example_id, 5)}
    assert len({frozenset(s) for s in seen_by_labeller.values()}) == 5  # five different models did the labelling


def test_folds_come_from_a_hash_of_the_id_whatever_the_order_or_the_subset():
    full = labellers(IDS, IDS)
    shuffled = random.Random(1).sample(IDS, len(IDS))
    assert labellers(shuffled, shuffled[:7]) == {i: full[i] for i in shuffled[:7]}  # same models, same labellers
    subset = IDS[::3]
    for example_id, seen in labellers(subset, subset).items():
        assert seen == full[example_id] & set(subset)  # its fold is its fold in any pool


def test_fold_of_spreads_ids_evenly():
    counts = [0] * 5
    for i in range(2000):
        counts[fold_of(f"q{i}", 5)] += 1
    assert all(330 <= c <= 470 for c in counts), counts  # 400 expected in each


def ids_in_fold(fold, count, folds=2):
    found = [f"id-{i}" for i in range(200) if fold_of(f"id-{i}", folds) == fold]
    return found[:count]


def test_a_fold_trained_on_one_relation_predicts_it_and_one_trained_on_nothing_predicts_unknown():
    in_0, in_1 = ids_in_fold(0, 3), ids_in_fold(1, 2)
    triples = [Triple("t", i, "a") for i in in_0 + in_1]
    # fold 0's model is fitted on fold 1: only "causal"; fold 1's on fold 0: both relations
    fitted = CrossFitted(lambda: Recording([]), in_0 + in_1, triples, ["temporal", "causal", "causal"] + ["causal"] * 2,
                         folds=2)
    assert fitted.models[0] == "causal" and isinstance(fitted.models[1], Recording)
    assert fitted.predict(in_0[:1], triples[:1]) == ["causal"]
    alone = CrossFitted(lambda: Recording([]), in_0, triples[:3], ["temporal", "causal", "causal"], folds=2)
    assert alone.models[0] == UNKNOWN  # every pool example is in fold 0: its model saw nothing
    assert isinstance(alone.models[1], Recording)
    assert alone.predict(in_0[:2], triples[:2]) == [UNKNOWN, UNKNOWN]


# --- the local classifier ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("settings, message", [
    ({"family": "forest"}, "family must be one of ('logreg', 'linear_svc'), got 'forest'"),
    ({"C": 0}, "C must be a finite number > 0, got 0"),
    ({"folds": 1}, "folds must be >= 2, got 1"),
])
def test_the_local_classifier_refuses_bad_settings(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LocalRelationClassifier(**settings)


def test_the_local_classifier_needs_two_relations_and_a_fit_before_predicting():
    with pytest.raises(ValueError, match="at least two relations"):
        LocalRelationClassifier().fit([Triple("t", "q", "a")] * 3, ["causal"] * 3)
    with pytest.raises(RuntimeError, match="fit the classifier first"):
        LocalRelationClassifier().predict([Triple("t", "q", "a")])


WHEN = [("When did the mill open?", "In 1850."), ("When was the bridge built?", "In 1902."),
        ("When did the school close?", "In 1931."), ("When was the harbour dredged?", "In 1877.")]
WHY = [("Why did the mill close?", "Because the river silted up."),
       ("Why was the bridge rebuilt?", "Because a flood destroyed it."),
       ("Why did the school move?", "Because the old building burned down."),
       ("Why was the harbour dredged?", "Because ships kept running aground.")]


def test_the_local_classifier_learns_relations_from_question_and_answer(embedder):
    triples = [Triple("an article", q, a) for q, a in WHEN + WHY]
    classifier = LocalRelationClassifier().fit(triples, ["temporal"] * 4 + ["causal"] * 4)
    new = [Triple("another article", "When did the railway arrive?", "In 1868."),
           Triple("another article", "Why did the railway stop running?", "Because the line flooded.")]
    assert classifier.predict(new) == ["temporal", "causal"]
    assert LocalRelationClassifier(pipeline=classifier.pipeline).predict(new) == ["temporal", "causal"]  # registered


def test_relation_pipeline_steps():
    names = lambda pipeline: [name for name, _, _ in pipeline.named_steps["features"].transformers]  # noqa: E731
    assert names(relation_pipeline()) == ["question_embedding", "answer_embedding"]
    assert names(relation_pipeline(question_words=True)) == ["question_words", "question_embedding",
                                                             "answer_embedding"]
    assert relation_pipeline(C=30.0).named_steps["classifier"].C == 30.0
    assert relation_pipeline("linear_svc", C=30.0).named_steps["classifier"].C == 1.0  # C / 30 for the SVM
    with pytest.raises(ValueError, match="unknown classifier family 'tree'"):
        relation_pipeline("tree")


def test_a_pipeline_saved_when_its_embedding_step_lived_in_opi_classify_still_loads():
    import io
    import zipfile

    import skops.io as sio

    from opi.relation_features import SentenceEmbeddingFeatures

    saved = zipfile.ZipFile(io.BytesIO(sio.dumps(relation_pipeline(embedding_model="some-model"))))
    renamed = io.BytesIO()
    with zipfile.ZipFile(renamed, "w") as older:  # as saved before the step moved to opi.relation_features
        for item in saved.infolist():
            content = saved.read(item.filename)
            older.writestr(item, content.replace(b"opi.relation_features", b"opi.classify")
                           if item.filename == "schema.json" else content)
    untrusted = sio.get_untrusted_types(data=renamed.getvalue())
    assert untrusted == ["opi.classify.SentenceEmbeddingFeatures"]
    pipeline = sio.loads(renamed.getvalue(), trusted=untrusted)
    step = pipeline.named_steps["features"].transformers[0][1]
    assert isinstance(step, SentenceEmbeddingFeatures) and step.model == "some-model"


def test_building_a_classifier_from_config_imports_no_scikit_learn():
    code = ("import sys; from opi.components import build; "
            "c = build({'_target_': 'opi.classify.LocalRelationClassifier', 'folds': 3}); "
            "print(c.folds, 'sklearn' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["3", "False"]  # a warm re-run needs none (~1.5 s per command)


# --- the LLM classifier ------------------------------------------------------------------------------------------

TWO = RelationSet("two", {"temporal": "ordering events in time", "causal": "cause and effect"})


def test_parse_relation_is_strict():
    labels = ["causal", "temporal"]
    assert parse_relation('{"relation": "causal"}', labels) == "causal"
    assert parse_relation('Sure! {"relation": "temporal"} is my answer', labels) == "temporal"
    assert parse_relation("Temporal.", labels) == "temporal"
    assert parse_relation("`causal`", labels) == "causal"
    assert parse_relation('{"relation": "spatial"}', labels) is None
    assert parse_relation("causal or temporal", labels) is None


def test_the_llm_classifier_asks_with_the_definitions_and_the_label_set():
    (message,) = LLMRelationClassifier(relation_set=TWO).messages(Triple("It rained.", "Why wet?", "Rain."))
    assert message == {"role": "user", "content": load_prompt("relation").render(
        definitions="- temporal: ordering events in time\n- causal: cause and effect", sentences="- It rained.",
        question="Why wet?", answer="Rain.", labels="temporal, causal")}


def test_a_finetuned_classifier_asks_in_its_training_format():
    from opi.llm.finetune import chat_messages

    triple = Triple("It rained.", "Why wet?", "Rain.")
    classifier = LLMRelationClassifier(relation_set=TWO, model="ft:gpt-4o:opi", finetuned=True)
    assert classifier.messages(triple) == chat_messages(triple, TWO)
    with pytest.raises(ValueError, match="a fine-tuned classifier needs model="):
        LLMRelationClassifier(finetuned=True)
    with pytest.raises(ValueError, match="parse_retries must be >= 0, got -1"):
        LLMRelationClassifier(parse_retries=-1)


def test_the_llm_classifier_uses_structured_output_and_records_parse_failures():
    relations = load_relation_set()
    triples = [Triple("In 1850 the mill opened.", f"When did mill {i} open?", "In 1850.") for i in range(6)]
    with FakeOpenAI() as server:
        client = ChatClient(LLMConfig(name="fake", reader=None, model="fake-model", base_url=server.base_url,
                                      api_key_env=None))
        classifier = LLMRelationClassifier(client=client, relation_set=relations)
        labels = classifier.predict(triples)
        schema = server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert all(label in relations for label in labels) and classifier.parse_failures == 0
    assert schema["properties"]["relation"]["enum"] == relations.labels

    class Garbage:
        ask_json = ChatClient.ask_json  # the real retry-and-count logic over a client that only talks nonsense

        def complete_many(self, requests, progress=None):
            return ["I think it is deep reasoning"] * len(requests)

    stubborn = LLMRelationClassifier(client=Garbage(), relation_set=relations, parse_retries=2)
    assert stubborn.predict(triples[:2]) == [UNKNOWN, UNKNOWN]  # never NaN, never dropped
    assert stubborn.parse_failures == 2


# --- warnings ------------------------------------------------------------------------------------------------------

def test_training_warnings_name_rare_relations_and_a_classifier_no_better_than_the_majority():
    labels = ["deductive"] * 6 + ["fuzzy"] * 4 + ["temporal"] * 2
    rare, chance = training_warnings(labels, cv_accuracy=0.5)  # majority: 6 of 12 = 0.5
    assert "fewer than 5 labelled examples of 2 of its 3 relations (fuzzy, temporal)" in rare
    assert "(0.500) is no better than always naming the most common relation (0.500)" in chance
    assert training_warnings(["deductive"] * 5 + ["fuzzy"] * 5, cv_accuracy=0.8) == []
    assert len(training_warnings([f"r{i}" for i in range(10)], cv_accuracy=0.0)) == 2  # the 10 rows
    assert training_warnings(["deductive"] * 5 + ["fuzzy"] * 5, cv_accuracy=None) == []
