"""A configuration's steps as a table (``flows.run.pipeline``): walked in order, each filling one field of
``Results``; a stage is added with one declared function and one table entry, and runs where it is put."""
import pytest

from flows.orchestration.results import Answers
from flows.orchestration.stage import stage
from flows.run.config import compose_config, typed
from flows.run.data import load_data
from flows.run.pipeline import PIPELINE, Step, run_stages, with_step
from flows.run.stages import Results
from tests.flows.orchestration.test_code import edited
from tests.helpers.direct_calls import DirectCalls

# what a stage of one's own is: one function, declared (its cache key covers opi.predictions and this file)
@stage("normalize-answers", counted_as="normalize", uses=("opi.predictions",))
def normalize_answers(answers: Answers) -> Answers:
    """Short answers: each cut to its first five words."""
    return Answers([" ".join(a.split()[:5]) if a is not None else None for a in answers.answers], answers.usage,
                   answers.calls)


# ... and one entry in the table: after the answers, it replaces them
NORMALIZE = Step("answers", stage=normalize_answers, inputs=lambda config, data, results: (results.answers,))


@pytest.fixture(scope="module")
def bm25_on_three():
    config = typed(compose_config(["retriever=bm25", "dataset.limit=3", "report.resamples=100"]))
    return config, load_data(config)


def test_every_step_fills_a_field_of_the_results_in_the_order_the_data_walks():
    fields = list(Results.__dataclass_fields__)
    assert [step.fills for step in PIPELINE] == ["store", "articles", "retrieval", "sentences", "answers",
                                                 "relations", "similarities", "quality"]
    assert all(step.fills in fields for step in PIPELINE)


def test_an_added_stage_runs_where_it_is_put_and_its_result_is_what_the_later_stages_read(bm25_on_three):
    config, data = bm25_on_three
    plain_calls, added_calls = DirectCalls(), DirectCalls()
    plain, _ = run_stages(config, data, None, calls=plain_calls)
    added, counts = run_stages(config, data, None, with_step(PIPELINE, NORMALIZE, after="answers"), added_calls)
    assert plain_calls.stages == ["chunking", "retrieval", "generation", "classification", "classification",
                                  "classification", "scoring"]  # no answer metrics: metrics.correctness/judge off
    assert added_calls.stages == ["retrieval", "generation", "normalize", "classification", "classification",
                                  "classification", "scoring"]  # the chunked articles: read once per process
    assert list(added.predictions["generated_answer"]) == [" ".join(a.split()[:5])
                                                           for a in plain.predictions["generated_answer"]]
    assert list(added.predictions["similarity"]) != list(plain.predictions["similarity"])  # scored on the new answers
    assert (counts["cache_hits"], counts["cache_misses"], added.stages) == (1.0, 7.0, 8)


def test_an_added_stage_is_keyed_on_its_declared_modules_and_its_file(monkeypatch):
    before = normalize_answers.code()
    assert normalize_answers.modules({}) == ("opi.predictions",) and normalize_answers.task.name == "normalize-answers"
    for name, changes in [("predictions.py", True), ("test_pipeline.py", True), ("render.py", False)]:
        edited(monkeypatch, name)
        assert (normalize_answers.code() != before) is changes, name
        monkeypatch.undo()
    assert normalize_answers.kept({}) is True
