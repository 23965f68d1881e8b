"""One configuration's stages as a table walked in order (``PIPELINE``): articles chunked -> retrieval (member
rankings to a depth shared by every k, reranked, cut and combined) -> complete sentences -> answers -> relations ->
answer similarity -> LLM-scored answer metrics; then the per-example rows scored (``flows.run.stages.scored``).

Each ``Step`` fills one field of ``Results`` from the configuration, the data and the fields before it. A step
that is one stage call names the stage (``flows.orchestration.tasks``, where it is declared with its cache rules)
and the inputs it takes; a step that needs more is a function (``flows.run.stages``). Adding a stage is one
declared function and one entry here (``tests/flows/run/test_pipeline.py`` adds one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from flows.orchestration import tasks
from flows.orchestration.cache import StageCalls
from flows.orchestration.results import Answers, Scores
from flows.orchestration.stage import Stage
from flows.orchestration.tasks import RegisteredModel
from flows.run.data import Data
from flows.run.identity import live_stores, own_embedding
from flows.run.stages import Results, chunked_articles, relation_stages, retrieve, scored, store_documents
from opi.llm.faults import LLMError
from opi.retrieval import sentence_texts
from opi.schemas import OPIConfig

StepFunction = Callable[[OPIConfig, Data, Results, StageCalls], Any]


@dataclass(frozen=True)
class Step:
    """Fills ``Results.<fills>``: with ``run``'s value, or with one call of ``stage`` on ``inputs``' arguments;
    ``when``: whether the configuration runs it at all (else the field keeps its default)."""

    fills: str
    run: StepFunction | None = None
    stage: Stage | None = None
    inputs: Callable[[OPIConfig, Data, Results], tuple] | None = None
    when: Callable[[OPIConfig], bool] = lambda config: True

    def produce(self, config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> Any:
        if self.run is not None:
            return self.run(config, data, results, calls)
        return calls.call(self.stage, *self.inputs(config, data, results))


def sentences(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> list[list[str]]:
    """The complete sentences of each example's article that its retrieved chunks cover."""
    return [sentence_texts(e, results.articles, results.retrieval.retrieved[e.id]) for e in data.examples]


def generate(config: OPIConfig, data: Data, results: Results, calls: StageCalls) -> Answers:
    """The reader's answer to each question from its sentences; an LLM that answered none stops the run."""
    answers = calls.call(tasks.answer, config.llm, [e.question for e in data.examples], results.sentences,
                         own_embedding(config, config.llm.reader), config.paths.llm_cache)
    if all(a is None for a in answers.answers):
        raise LLMError(f"{config.llm.name} gave no answer to any of the {len(answers.answers)} questions (every reply "
                       "was empty or a refusal, also when asked again): check llm.model and the answer prompt")
    return answers


PIPELINE: tuple[Step, ...] = (
    Step("store", store_documents, when=lambda config: bool(live_stores(config))),
    Step("articles", chunked_articles),
    Step("retrieval", retrieve),
    Step("sentences", sentences),
    Step("answers", generate),
    Step("relations", relation_stages),
    Step("similarities", stage=tasks.answer_similarity,
         inputs=lambda config, data, results: ([e.answer for e in data.examples], results.answers.answers,
                                               config.metrics.similarity)),
    Step("quality", stage=tasks.answer_quality, when=lambda config: config.metrics.correctness or config.metrics.judge,
         inputs=lambda config, data, results: (config.metrics, config.llm, [e.question for e in data.examples],
                                               [e.answer for e in data.examples], results.answers.answers,
                                               results.similarities, config.paths.llm_cache)),
)


def with_step(pipeline: tuple[Step, ...], step: Step, after: str) -> tuple[Step, ...]:
    """``pipeline`` with ``step`` inserted after the (last) step that fills ``after``."""
    at = max(i for i, s in enumerate(pipeline) if s.fills == after) + 1
    return (*pipeline[:at], step, *pipeline[at:])


def run_stages(config: OPIConfig, data: Data, registered: RegisteredModel | None,
               pipeline: tuple[Step, ...] = PIPELINE, calls: StageCalls | None = None
               ) -> tuple[Scores, dict[str, float]]:
    """All steps of one configuration, then its scores: (result, this run's cache counts, seconds and the work its
    stages did)."""
    calls = calls or StageCalls(config.paths.cache_dir, quote_inputs=config.orchestration.runner == "threads",
                                embedding_store=config.paths.embedding_store)
    results = Results(registered)
    for step in pipeline:
        if step.when(config):
            setattr(results, step.fills, step.produce(config, data, results, calls))
    return scored(config, data, results, calls.hits + calls.misses), calls.counts()

