"""Structured-config schemas for Hydra: one dataclass per config group, registered in Hydra's ConfigStore.

Hydra rejects unknown keys and wrong types while composing; value ranges (k >= 1, overlap < size, beta > 0 ...)
are checked by ``__post_init__`` when ``check_config`` turns the composed config into these objects, still
before any data or model is loaded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass
class DatasetConfig:
    kind: str = "bundled"  # bundled | rag12000 | table | squad
    name: str = "deeplogic-130"
    path: Optional[str] = None
    columns: dict[str, str] = field(default_factory=dict)
    labels_path: Optional[str] = None
    label_join: str = "id"
    hub_repo: str = "neural-bridge/rag-dataset-12000"
    split: str = "all"
    relations: Optional[list[str]] = None
    sample: Optional[int] = None
    limit: Optional[int] = None
    on_invalid: str = "error"
    max_context_words: int = 100_000  # longer articles are refused (a wrong column or an unsplit corpus, usually)

    def __post_init__(self):
        _require(self.max_context_words > 0, f"dataset.max_context_words must be > 0, got {self.max_context_words}")
        _require(self.kind in ("bundled", "rag12000", "table", "squad"),
                 f"dataset.kind must be bundled, rag12000, table or squad, got {self.kind!r}")
        _require(self.on_invalid in ("error", "skip"), f"dataset.on_invalid must be error or skip, got {self.on_invalid!r}")
        _require(self.label_join in ("id", "row"), f"dataset.label_join must be id or row, got {self.label_join!r}")
        _require(self.limit is None or self.limit > 0, f"dataset.limit must be > 0, got {self.limit}")
        _require(self.sample is None or self.sample > 0, f"dataset.sample must be > 0, got {self.sample}")


@dataclass
class RelationsConfig:
    set: str = "paper13"  # a packaged set name or a path to a YAML label file


@dataclass
class ChunkingConfig:
    size: int = 100
    overlap: int = 20

    def __post_init__(self):
        _require(self.size > 0, f"chunking.size must be > 0 words, got {self.size}")
        _require(0 <= self.overlap < self.size,
                 f"chunking.overlap must be >= 0 and smaller than chunking.size ({self.size}), got {self.overlap}")


@dataclass
class EmbeddingConfig:
    model: str = "packaged:all-MiniLM-L6-v2"
    device: str = "cpu"
    batch_size: int = 64
    backend: str = "torch"

    def __post_init__(self):
        _require(self.batch_size > 0, f"embedding.batch_size must be > 0, got {self.batch_size}")
        _require(self.backend in ("torch", "onnx", "openvino"), "embedding.backend: torch, onnx or openvino")


@dataclass
class RetrieverConfig:
    name: str = MISSING
    k: int = 4

    def __post_init__(self):
        _require(self.k >= 1, f"retriever {self.name}: k must be >= 1, got {self.k}")


@dataclass
class DPSConfig(RetrieverConfig):
    name: str = "dps"


@dataclass
class KNNConfig(RetrieverConfig):
    name: str = "knn"


@dataclass
class TFIDFConfig(RetrieverConfig):
    name: str = "tfidf"


@dataclass
class EDIConfig(RetrieverConfig):
    name: str = "edi"


@dataclass
class BM25Config(RetrieverConfig):
    name: str = "bm25"
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25

    def __post_init__(self):
        super().__post_init__()
        _require(self.k1 >= 0 and 0 <= self.b <= 1, "retriever bm25: need k1 >= 0 and 0 <= b <= 1")


@dataclass
class SVMConfig(RetrieverConfig):
    name: str = "svm"
    C: float = 0.1
    max_iter: int = 10000
    tol: float = 1e-6

    def __post_init__(self):
        super().__post_init__()
        _require(self.C > 0, f"retriever svm: C must be > 0, got {self.C}")


@dataclass
class MMRConfig(RetrieverConfig):
    name: str = "mmr"
    fetch_k: int = 20
    lambda_mult: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        _require(self.fetch_k >= self.k, f"retriever mmr: fetch_k ({self.fetch_k}) must be >= k ({self.k})")
        _require(0 <= self.lambda_mult <= 1, f"retriever mmr: lambda_mult must be in [0, 1], got {self.lambda_mult}")


RETRIEVER_SCHEMAS = {cls().name: cls for cls in
                     (DPSConfig, KNNConfig, BM25Config, SVMConfig, TFIDFConfig, MMRConfig, EDIConfig)}


@dataclass
class CombinationConfig:
    name: str = "single"
    mode: str = "single"  # single | algorithmic (A-) | sentence (S-)
    members: list[str] = field(default_factory=list)  # names in `retrievers`; empty for single
    weights: Optional[list[float]] = None
    c: float = 60.0
    k: Optional[int] = 4  # A- cut after fusion; null = keep all fused chunks (LangChain's behaviour)

    def __post_init__(self):
        _require(self.mode in ("single", "algorithmic", "sentence"),
                 f"combination.mode must be single, algorithmic or sentence, got {self.mode!r}")
        unknown = [m for m in self.members if m not in RETRIEVER_SCHEMAS]
        _require(not unknown, f"combination.members: unknown retriever(s) {unknown}; known: {sorted(RETRIEVER_SCHEMAS)}")
        _require(self.mode == "single" or len(self.members) >= 2,
                 f"combination {self.name}: mode {self.mode} needs at least two members")
        _require(self.weights is None or len(self.weights) == len(self.members),
                 "combination.weights needs one weight per member")
        _require(self.k is None or self.k >= 1, f"combination.k must be >= 1 or null, got {self.k}")
        _require(self.c > 0, f"combination.c must be > 0, got {self.c}")


@dataclass
class LocalServerConfig:
    model: str = "smollm2"  # a packaged model name or a path to a .gguf file
    threads: int = 2
    context: int = 4096
    parallel: int = 2


@dataclass
class LLMConfig:
    kind: str = "extractive"  # extractive (offline reader, not an LLM) | openai (any OpenAI-compatible endpoint)
    name: str = "extractive"
    n_sentences: int = 2  # extractive only
    model: Optional[str] = None
    base_url: Optional[str] = None  # null = OpenAI
    api_key_env: Optional[str] = "OPENAI_API_KEY"  # the NAME of the variable holding the key, never the key
    temperature: float = 0.0
    max_tokens: int = 256
    timeout: float = 60.0
    max_retries: int = 6
    concurrency: int = 4
    requests_per_minute: Optional[float] = None
    tokens_per_minute: Optional[float] = None
    price_input_per_million: float = 0.0  # USD, for the cost metric
    price_output_per_million: float = 0.0
    structured_output: bool = True
    local_server: Optional[LocalServerConfig] = None  # start a llama.cpp server on 127.0.0.1 for this run

    def __post_init__(self):
        _require(self.kind in ("extractive", "openai"), f"llm.kind must be extractive or openai, got {self.kind!r}")
        _require(self.n_sentences >= 1, f"llm.n_sentences must be >= 1, got {self.n_sentences}")
        if self.kind == "openai":
            _require(bool(self.model), "llm.model is required for an OpenAI-compatible LLM (e.g. llm.model=gpt-4o)")
            _require(self.max_tokens > 0 and self.timeout > 0 and self.max_retries >= 0 and self.concurrency >= 1,
                     "llm.max_tokens and llm.timeout must be > 0, llm.max_retries >= 0, llm.concurrency >= 1")
            _require(self.requests_per_minute is None or self.requests_per_minute > 0,
                     "llm.requests_per_minute must be > 0 or null")
            _require(self.tokens_per_minute is None or self.tokens_per_minute > 0,
                     "llm.tokens_per_minute must be > 0 or null")


@dataclass
class ClassifierConfig:
    kind: str = "local"  # local (scikit-learn) | llm (the configured LLM) | finetuned (a fine-tuned model id)
    name: str = "local-clf"
    folds: int = 5
    family: str = "logreg"  # local: logreg | linear_svc
    C: float = 30.0
    registered: Optional[str] = None  # local: use a registered model, e.g. models:/opi-relation-classifier@champion
    model: Optional[str] = None  # finetuned: the model id, e.g. ft:gpt-4o-2024-08-06:org::abc123
    parse_retries: int = 2

    def __post_init__(self):
        _require(self.kind in ("local", "llm", "finetuned"),
                 f"classifier.kind must be local, llm or finetuned, got {self.kind!r}")
        _require(self.folds >= 2, f"classifier.folds must be >= 2, got {self.folds}")
        _require(self.C > 0, f"classifier.C must be > 0, got {self.C}")
        _require(self.family in ("logreg", "linear_svc"), f"classifier.family: logreg or linear_svc, got {self.family!r}")
        _require(self.kind != "finetuned" or bool(self.model),
                 "classifier=finetuned needs classifier.model=<fine-tuned model id>")


@dataclass
class MetricsConfig:
    beta: float = 1.0
    betas: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    correctness: bool = False  # RAGAS-style answer correctness (LLM calls through the run's llm endpoint)
    judge: bool = False  # 0-3-7 LLM judge (same endpoint)
    correctness_weights: list[float] = field(default_factory=lambda: [0.75, 0.25])
    similarity_threshold: Optional[float] = None
    parse_retries: int = 2

    def __post_init__(self):
        _require(len(self.correctness_weights) == 2 and min(self.correctness_weights) >= 0
                 and sum(self.correctness_weights) > 0, "metrics.correctness_weights: two non-negative numbers")
        _require(self.beta > 0, f"metrics.beta must be > 0, got {self.beta}")
        _require(all(b > 0 for b in self.betas), f"metrics.betas must all be > 0, got {self.betas}")


@dataclass
class ReportConfig:
    """Uncertainty on every run (bootstrap intervals) and the sweep report on every multirun's parent run."""
    enabled: bool = True  # build the report when a multirun ends
    confidence: float = 0.95  # bootstrap interval level
    resamples: int = 2000  # bootstrap resamples (examples drawn within each relation)
    alpha: float = 0.05  # significance level of the paired permutation tests
    permutations: int = 9999

    def __post_init__(self):
        _require(0 < self.confidence < 1, f"report.confidence must be in (0, 1), got {self.confidence}")
        _require(0 < self.alpha < 1, f"report.alpha must be in (0, 1), got {self.alpha}")
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


@dataclass
class TrackingConfig:
    enabled: bool = True
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "opi"
    label: Optional[str] = None  # tag opi.label on the sweep's parent and child runs (opi-nightly finds its runs by it)


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
        _require(0 < self.test_fraction < 1, f"train.test_fraction must be in (0, 1), got {self.test_fraction}")
        _require(self.cv_folds >= 2, f"train.cv_folds must be >= 2, got {self.cv_folds}")
        _require(set(self.families) <= {"logreg", "linear_svc"} and self.families,
                 f"train.families: a non-empty subset of [logreg, linear_svc], got {self.families}")


@dataclass
class PathsConfig:
    cache_dir: str = ".opi_cache"
    llm_cache: str = ".opi_cache/llm_calls.sqlite"


@dataclass
class OPIConfig:
    dataset: DatasetConfig = MISSING
    relations: RelationsConfig = MISSING
    chunking: ChunkingConfig = MISSING
    embedding: EmbeddingConfig = MISSING
    retriever: Any = MISSING
    retrievers: dict[str, Any] = field(default_factory=dict)
    combination: CombinationConfig = MISSING
    llm: LLMConfig = MISSING
    classifier: ClassifierConfig = MISSING
    metrics: MetricsConfig = MISSING
    tracking: TrackingConfig = MISSING
    report: ReportConfig = MISSING
    orchestration: OrchestrationConfig = MISSING
    paths: PathsConfig = field(default_factory=PathsConfig)
    train: Optional[TrainConfig] = None  # only opi-train-classifier composes it
    seed: int = 0


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="opi_schema", node=OPIConfig)
    # Schemas live in their own group ("schema/..."), pulled in by each option's defaults list as
    # `/schema/<group>@_here_`, so that `retriever=glob(*)` sweeps the real options only.
    for group, node in [("dataset", DatasetConfig), ("relations", RelationsConfig), ("chunking", ChunkingConfig),
                        ("embedding", EmbeddingConfig), ("combination", CombinationConfig), ("llm", LLMConfig),
                        ("classifier", ClassifierConfig), ("metrics", MetricsConfig), ("tracking", TrackingConfig),
                        ("report", ReportConfig), ("orchestration", OrchestrationConfig),
                        ("train", TrainConfig)]:
        cs.store(group="schema", name=group, node=node)
    for name, node in RETRIEVER_SCHEMAS.items():
        cs.store(group="schema/retriever", name=name, node=node)


def check_config(cfg) -> OPIConfig:
    """Run every schema's range checks; raises ValueError with the offending key in the message."""
    from omegaconf import OmegaConf

    checked: OPIConfig = OmegaConf.to_object(cfg)
    for name, node in [("retriever", checked.retriever), *checked.retrievers.items()]:
        retriever_name = node["name"] if isinstance(node, dict) else node.name
        if retriever_name not in RETRIEVER_SCHEMAS:
            raise ValueError(f"{name}: unknown retriever {retriever_name!r}; known: {sorted(RETRIEVER_SCHEMAS)}")
        if isinstance(node, dict):
            RETRIEVER_SCHEMAS[retriever_name](**node)
    if checked.metrics.correctness or checked.metrics.judge:
        _require(checked.llm.kind == "openai", "metrics.correctness and metrics.judge ask the configured LLM "
                 "endpoint: choose an OpenAI-compatible llm (llm=gpt-4o, llm=local, ...)")
    if checked.classifier.kind in ("llm", "finetuned"):
        _require(checked.llm.kind == "openai", f"classifier={checked.classifier.kind} sends requests through the "
                 "configured LLM endpoint: choose an OpenAI-compatible llm (llm=gpt-4o, llm=local, ...)")
    missing = [m for m in checked.combination.members if m not in checked.retrievers]
    _require(not missing, f"combination.members {missing} have no config under `retrievers`")
    return checked
