"""flows.tracking.scorers: OPI's metrics as MLflow GenAI scorers give, inside ``mlflow.genai.evaluate``, exactly what
OPI's own code gives on the same rows (the LLM is tests/helpers/fake_openai.py, whose replies are a function of the
prompt: a scorer that asked anything else, e.g. without the row's context, would get other relations and scores)."""
import mlflow
import pandas as pd
import pytest
from mlflow.entities import Document, SpanType

from flows.orchestration.tasks import answer_similarity
from flows.tracking.scorers import AnswerCorrectness, BertSim, Judge037, RelationCorrect, opi_from_results
from opi.classify import LLMRelationClassifier, LocalRelationClassifier
from opi.llm.client import ChatClient
from opi.metrics import correctness
from opi.metrics.extrinsic import LLMJudge
from opi.metrics.opi import bertsim, lrcr, summary
from opi.relations import Triple, load_relation_set
from opi.schemas import EmbeddingConfig, LLMConfig
from tests.helpers.fake_openai import FakeOpenAI

QUESTIONS = ["Why did the Velmora mill close in 1850?", "When was the harbour rebuilt?",
             "How many families relied on the granary?", "What followed the bridge's collapse?",
             "Which ledger lists the lamp oil prices?"]
ANSWERS = ["The river flooded it. Repairs cost too much.", "After the storm of 1760.",
           "Five families. Each sent two workers. Most worked in winter.", "A ferry service began.",
           "The clerk's monthly ledger."]
TRUTHS = ["Floods made the repairs too costly, so the mill closed.", "It was rebuilt after the 1760 storm.",
          "Five families depended on it.", "A ferry replaced the bridge.", "The clerk's ledger lists them."]
CONTEXTS = ["In 1850 the river flooded the mill. The owners could not pay for repairs.",
            "A storm in 1759 wrecked the harbour; it was rebuilt the next year.", None,
            "When the bridge fell, the town started a ferry.", None]  # None: no context in inputs, and no retriever
OUTPUTS = [ANSWERS[0], {"response": ANSWERS[1]}, {"answer": ANSWERS[2]}, ANSWERS[3], ANSWERS[4]]  # every shape


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A fresh SQLite tracking store (artifacts in the same folder) for this module only; the tracking URI and the
    experiment variable are put back afterwards."""
    folder = tmp_path_factory.mktemp("scorers")
    previous = mlflow.get_tracking_uri()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")
        patch.setenv("MLFLOW_EXPERIMENT_ID", "0")  # set_experiment sets it: restored with the rest
        patch.setenv("MLFLOW_TRACKING_URI", previous)  # set_tracking_uri sets it: restored (unset) with the rest
        uri = f"sqlite:///{folder}/mlflow.db"
        mlflow.set_tracking_uri(uri)
        try:
            experiment = mlflow.MlflowClient(uri).create_experiment("scorers", artifact_location=str(folder / "a"))
            mlflow.set_experiment(experiment_id=experiment)
            yield uri
        finally:
            mlflow.set_tracking_uri(previous)  # before the patch undoes the variable


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI() as server:
        yield LLMConfig(name="fake", reader=None, model="fake-model", base_url=server.base_url, api_key_env=None,
                        timeout=10)


def predicted_relations(llm: LLMConfig, triples: list[Triple]) -> list[str]:
    """What OPI's LLM classifier names for the triples (a client of its own: nothing shared with the scorers)."""
    return LLMRelationClassifier(client=ChatClient(llm), relation_set=load_relation_set()).predict(triples)


def test_every_scorer_inside_evaluate_equals_opis_own_computation(store, llm):
    triples = [Triple(context or "", q, a) for context, q, a in zip(CONTEXTS, QUESTIONS, ANSWERS)]
    predicted = predicted_relations(llm, triples)
    labels = load_relation_set().labels
    # gold: the classifier's relation for rows 0, 2, 3 (right), another one for rows 1 and 4 (wrong)
    gold = [p if i in (0, 2, 3) else labels[(labels.index(p) + 1) % len(labels)] for i, p in enumerate(predicted)]
    assert len(set(gold)) >= 2  # OPI per relation has something to tell apart
    registered = LocalRelationClassifier().fit(triples, gold)  # a scikit-learn classifier, registered below
    with mlflow.start_run():
        mlflow.sklearn.log_model(registered.pipeline, name="relation-classifier", pip_requirements=["scikit-learn"],
                                 registered_model_name="opi-scorer-test",
                                 skops_trusted_types=["opi.relation_features.SentenceEmbeddingFeatures"])
    rows = [{"inputs": {"question": q, **({"context": c} if c else {})}, "outputs": output,
             "expectations": {"expected_response": truth, "gold_relation": g}}
            for q, c, output, truth, g in zip(QUESTIONS, CONTEXTS, OUTPUTS, TRUTHS, gold)]

    result = mlflow.genai.evaluate(data=rows, scorers=[
        BertSim(), RelationCorrect(llm=llm), AnswerCorrectness(llm=llm), Judge037(llm=llm),
        RelationCorrect(name="relation_correct_registered", registered="models:/opi-scorer-test/1")])
    table = result.result_df
    table.index = [QUESTIONS.index(request["question"]) for request in table["request"]]
    table = table.sort_index()

    # OPI's own computation on the same rows: the answer-similarity task's code, the classifiers, the LLM metrics
    similarities = answer_similarity.fn(TRUTHS, ANSWERS, EmbeddingConfig())
    assert table["bertsim/value"].tolist() == pytest.approx(similarities, abs=1e-6)
    assert result.metrics["bertsim/mean"] == pytest.approx(bertsim(similarities), abs=1e-6)
    assert table["relation_correct/value"].tolist() == [True, False, True, True, False]
    assert result.metrics["relation_correct/mean"] == pytest.approx(lrcr(gold, predicted))  # LRCR = 0.6
    named = [next(a["metadata"]["predicted_relation"] for a in row if a["assessment_name"] == "relation_correct")
             for row in table["assessments"]]
    assert named == predicted
    assert all(f"{p!r}, gold {g!r}" in text for p, g, text in zip(predicted, gold, table["relation_correct/rationale"]))
    assert table["relation_correct_registered/value"].tolist() == [p == g for p, g in
                                                                   zip(registered.predict(triples), gold)]
    client = ChatClient(llm)
    expected = [correctness.AnswerCorrectness(client).score(q, a, t, s)
                for q, a, t, s in zip(QUESTIONS, ANSWERS, TRUTHS, similarities)]
    assert table["answer_correctness/value"].tolist() == pytest.approx([e.score for e in expected], abs=1e-6)
    assert {e.f1 for e in expected} == {2 / 3, 1.0, 0.5}  # the fake: first statement TP, the rest FP -> F1 varies
    assert all(f"F1 {e.f1:.4f}" in text for e, text in zip(expected, table["answer_correctness/rationale"]))
    assert table["judge_037/value"].tolist() == LLMJudge(client).score(QUESTIONS, TRUTHS, ANSWERS)
    assert set(table["judge_037/value"]) <= {0, 3, 7}

    metrics, per_relation = opi_from_results(result)
    rows_opi = pd.DataFrame({"relation": gold, "predicted_relation": predicted, "similarity": similarities})
    want_metrics, want_table = summary(rows_opi, sorted(set(gold)))
    assert metrics == pytest.approx({**want_metrics, "rows_left_out": 0.0}, abs=1e-6)
    pd.testing.assert_frame_equal(per_relation, want_table, atol=1e-6)


def test_the_relation_context_is_the_traces_top_level_retriever_documents(store, llm):
    question, answer = "Why did the Velmora mill close in 1850?", "The river flooded it."
    with mlflow.start_span("app") as root:
        with mlflow.start_span("search", span_type=SpanType.RETRIEVER) as search:
            with mlflow.start_span("inner", span_type=SpanType.RETRIEVER) as inner:  # inside the other: not counted
                inner.set_outputs([Document(page_content="Nothing to do with mills.")])
            search.set_outputs([Document(page_content="In 1850 the river flooded the mill."),
                                Document(page_content="Repairs cost too much.")])
        root.set_outputs(answer)
    trace = mlflow.get_trace(root.trace_id, flush=True)
    assert trace is not None
    scorer = RelationCorrect(llm=llm)

    def named(inputs, with_trace=trace) -> str:
        feedback = scorer.run(inputs=inputs, outputs=answer, expectations={"gold_relation": "causal"},
                              trace=with_trace)
        assert feedback.name == "relation_correct" and feedback.value == (feedback.metadata["predicted_relation"]
                                                                          == "causal")
        return feedback.metadata["predicted_relation"]

    contexts = ["In 1850 the river flooded the mill. Repairs cost too much.", "Given in inputs.", ""]
    want = predicted_relations(llm, [Triple(c, question, answer) for c in contexts])
    assert len(set(want)) == 3  # the three contexts get three relations: the test tells them apart
    assert named({"question": question}) == want[0]
    assert named({"question": question, "context": "Given in inputs."}) == want[1]  # inputs win over the trace
    assert named({"question": question}, with_trace=None) == want[2]


def test_opi_from_results_by_hand_and_a_classifier_is_required(llm):
    frame = pd.DataFrame({"gold_relation": ["causal", "causal", "temporal", "temporal"],
                          "bertsim": [0.8, 0.6, 0.4, None],  # the last row: a scorer error, left out
                          "relation_correct": [True, False, True, True]})
    metrics, table = opi_from_results(frame)
    # causal: B = (0.8 + 0.6) / 2 = 0.7, L = 1/2, OPI-1 = 2·0.7·0.5 / 1.2 = 0.583333;
    #         OPI-2 = 5·0.35 / (0.7 + 4·0.5) = 0.648148
    # temporal: B = 0.4, L = 1, OPI-1 = 2·0.4 / 1.4 = 0.571429
    # pooled (Formula 3): OPI-1 of mean B 0.55 and mean L 0.75 = 2·0.55·0.75 / 1.3 = 0.634615
    # mean of per-relation OPI-1: (0.583333 + 0.571429) / 2 = 0.577381
    assert table["relation"].tolist() == ["causal", "temporal"] and table["n"].tolist() == [2, 1]
    assert table["opi_1"].tolist() == pytest.approx([0.583333, 0.571429], abs=1e-6)
    assert table["opi_2"].iloc[0] == pytest.approx(0.648148, abs=1e-6)
    assert metrics["opi_1"] == pytest.approx(0.634615, abs=1e-6)
    assert metrics["opi_1_mean"] == pytest.approx(0.577381, abs=1e-6)
    assert metrics["bertsim"] == pytest.approx(0.6) and metrics["lrcr"] == pytest.approx(2 / 3)
    assert metrics["rows_left_out"] == 1.0
    with pytest.raises(ValueError, match="exactly one of llm"):
        RelationCorrect()
    with pytest.raises(ValueError, match="exactly one of llm"):
        RelationCorrect(llm=llm, registered="models:/opi-scorer-test/1")
