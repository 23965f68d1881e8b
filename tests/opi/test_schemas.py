"""opi.schemas: the range checks of every config group, with the messages a user sees, the smallest values they
accept, and the defaults other modules read from here."""
import dataclasses
import re

import pytest
from omegaconf import OmegaConf

from opi.combine import RankFusion, Single
from opi.schemas import (ChunkingConfig, DatasetConfig, EmbeddingConfig, LLMConfig, MetricsConfig, OPIConfig,
                         OrchestrationConfig, PathsConfig, RelationsConfig, ReportConfig, RetrievalConfig, TrainConfig)


def endpoint(**overrides) -> LLMConfig:
    """An LLM config with an endpoint (a model): its request settings are checked."""
    return LLMConfig(**{"name": "x", "reader": None, "model": "m", **overrides})


REFUSED = [
    (lambda: DatasetConfig(max_context_words=0), "dataset.max_context_words must be > 0, got 0"),
    (lambda: DatasetConfig(kind="excel"), "dataset.kind must be bundled, rag12000, table or squad, got 'excel'"),
    (lambda: DatasetConfig(on_invalid="ignore"), "dataset.on_invalid must be error or skip, got 'ignore'"),
    (lambda: DatasetConfig(label_join="name"), "dataset.label_join must be id or row, got 'name'"),
    (lambda: DatasetConfig(limit=0), "dataset.limit must be > 0, got 0"),
    (lambda: DatasetConfig(sample=-3), "dataset.sample must be > 0, got -3"),
    (lambda: RelationsConfig(gold="maybe"), "relations.gold must be one of labels, classifier, none or null, got 'maybe'"),
    (lambda: RetrievalConfig(scope="web"), "retrieval.scope must be article or corpus, got 'web'"),
    (lambda: RetrievalConfig(depth=0), "retrieval.depth must be >= 1, got 0"),
    (lambda: ChunkingConfig(size=0, overlap=0), "chunking.size must be > 0 words, got 0"),
    (lambda: ChunkingConfig(size=100, overlap=100),
     "chunking.overlap must be >= 0 and smaller than chunking.size (100), got 100"),
    (lambda: ChunkingConfig(size=100, overlap=-1),
     "chunking.overlap must be >= 0 and smaller than chunking.size (100), got -1"),
    (lambda: EmbeddingConfig(batch_size=0), "embedding.batch_size must be > 0, got 0"),
    (lambda: EmbeddingConfig(backend="tensorflow"), "embedding.backend: torch, onnx or openvino"),
    (lambda: endpoint(max_tokens=0), "llm.max_tokens must be > 0, got 0"),
    (lambda: endpoint(timeout=0), "llm.timeout must be a finite number > 0, got 0"),
    (lambda: EmbeddingConfig(provider="openai-compatible", concurrency=0), "embedding.concurrency >= 1, got 6 and 0"),
    (lambda: EmbeddingConfig(provider="remote"), "embedding.provider must be one of sentence-transformers, "),
    (lambda: MetricsConfig(retrieval_k=[0, 4]), "metrics.retrieval_k: cut-offs >= 1"),
    (lambda: MetricsConfig(evidence_match="part"), "metrics.evidence_match: whole or sentence, got 'part'"),
    (lambda: endpoint(max_retries=-1), "llm.max_retries must be >= 0"),
    (lambda: endpoint(concurrency=0), "llm.concurrency >= 1"),
    (lambda: endpoint(deadline=0), "llm.deadline must be a finite number > 0 or null, got 0"),
    (lambda: endpoint(deadline=-1), "llm.deadline must be a finite number > 0 or null, got -1"),
    (lambda: endpoint(requests_per_minute=0), "llm.requests_per_minute must be a finite number > 0 or null, got 0"),
    (lambda: endpoint(tokens_per_minute=0), "llm.tokens_per_minute must be a finite number > 0 or null, got 0"),
    (lambda: endpoint(base_url="127.0.0.1:18777/v1"), "llm.base_url must start with http:// or https:// (e.g. "
                                                      "http://127.0.0.1:8000/v1), or be null for OpenAI"),
    (lambda: EmbeddingConfig(base_url="localhost:8000/v1"), "embedding.base_url must start with http:// or https://"),
    (lambda: MetricsConfig(correctness_weights=[1.0]), "metrics.correctness_weights: two non-negative numbers"),
    (lambda: MetricsConfig(correctness_weights=[0, 0]), "metrics.correctness_weights: two non-negative numbers"),
    (lambda: MetricsConfig(correctness_weights=[-1, 2]), "metrics.correctness_weights must be a finite number >= 0, got -1"),
    (lambda: MetricsConfig(beta=0), "metrics.beta must be a finite number > 0, got 0"),
    (lambda: MetricsConfig(beta=float("inf")), "metrics.beta must be a finite number > 0, got inf"),
    (lambda: MetricsConfig(beta=float("nan")), "metrics.beta must be a finite number > 0, got nan"),
    (lambda: MetricsConfig(betas=[1.0, 0.0]), "metrics.betas must be a finite number > 0, got 0.0"),
    (lambda: MetricsConfig(similarity_threshold=1.5), "metrics.similarity_threshold must be a finite number in [-1, 1] or null, got 1.5"),
    (lambda: MetricsConfig(parse_retries=-1), "metrics.parse_retries must be >= 0, got -1"),
    (lambda: endpoint(empty_retries=-1), "llm.empty_retries must be >= 0, got -1"),
    (lambda: endpoint(temperature=-0.5), "llm.temperature must be a finite number >= 0, got -0.5"),
    (lambda: ChunkingConfig(length="tokens"), "chunking.length: words or characters, got 'tokens'"),
    (lambda: OPIConfig(seed=-1), "seed must be an integer from 0 to 2**32 - 1, got -1"),
    (lambda: OPIConfig(seed=2**32), "seed must be an integer from 0 to 2**32 - 1, got 4294967296"),
    (lambda: ReportConfig(confidence=1.0), "report.confidence must be a finite number in (0, 1), got 1.0"),
    (lambda: ReportConfig(alpha=0), "report.alpha must be a finite number in (0, 1), got 0"),
    (lambda: ReportConfig(resamples=99), "report.resamples must be >= 100, got 99"),
    (lambda: ReportConfig(permutations=98), "report.permutations must be >= 99, got 98"),
    (lambda: OrchestrationConfig(runner="celery"), "orchestration.runner: threads or dask, got 'celery'"),
    (lambda: OrchestrationConfig(max_workers=0), "orchestration.max_workers must be >= 1, got 0"),
    (lambda: OrchestrationConfig(dask_workers=0), "orchestration.dask_workers must be >= 1, got 0"),
    (lambda: TrainConfig(backend="gpu"), "train.backend: local, openai or none, got 'gpu'"),
    (lambda: TrainConfig(per_relation=1), "train.per_relation must be >= 2, got 1"),
    (lambda: TrainConfig(test_fraction=1), "train.test_fraction must be a finite number in (0, 1), got 1"),
    (lambda: TrainConfig(cv_folds=1), "train.cv_folds must be >= 2, got 1"),
    (lambda: TrainConfig(families=[]), "train.families: a non-empty subset of [logreg, linear_svc], got []"),
    (lambda: TrainConfig(families=["tree"]), "train.families: a non-empty subset of [logreg, linear_svc], got ['tree']"),
]


@pytest.mark.parametrize("make, message", REFUSED, ids=[m for _, m in REFUSED])
def test_an_out_of_range_setting_is_refused_naming_it(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


ACCEPTED = [
    lambda: ChunkingConfig(size=1, overlap=0),
    lambda: ChunkingConfig(size=100, overlap=99),
    lambda: RetrievalConfig(scope="corpus", depth=1),
    lambda: DatasetConfig(limit=1, sample=1, max_context_words=1),
    lambda: ReportConfig(resamples=100, permutations=99, confidence=0.5, alpha=0.5),
    lambda: OrchestrationConfig(runner="dask", max_workers=1, dask_workers=1),
    lambda: TrainConfig(per_relation=2, cv_folds=2, families=["linear_svc"]),
    lambda: MetricsConfig(correctness_weights=[0, 1], beta=0.1, betas=[0.1]),
    lambda: endpoint(deadline=None, max_retries=0, concurrency=1),
    lambda: endpoint(deadline=0.5),
    lambda: endpoint(base_url="HTTPS://gateway.example/v1"),
    lambda: EmbeddingConfig(base_url="http://user:secret@127.0.0.1:8000/v1"),
    lambda: RelationsConfig(gold=None),
]


@pytest.mark.parametrize("make", ACCEPTED)
def test_the_smallest_valid_settings_are_accepted(make):
    make()


def test_a_base_url_without_a_scheme_is_refused_without_its_credentials():
    # urlsplit reads "user" as the scheme here: no redaction would find the password
    with pytest.raises(ValueError) as raised:
        endpoint(base_url="user:secret@127.0.0.1:8000/v1")
    assert str(raised.value).startswith("llm.base_url must start with http://") and "secret" not in str(raised.value)


def test_without_a_model_the_llm_request_settings_are_not_checked():
    settings = LLMConfig(name="extractive", reader=None, max_tokens=0, concurrency=0)  # no endpoint to ask
    assert not settings.endpoint and endpoint().endpoint


def test_defaults_other_modules_read_from_here():
    assert RetrievalConfig().depth == 20 and RetrievalConfig().scope == "article"
    assert (ChunkingConfig().size, ChunkingConfig().overlap) == (100, 20)  # the paper's chunking
    assert EmbeddingConfig.model == "packaged:all-MiniLM-L6-v2" and EmbeddingConfig.device == "cpu"


def test_the_llm_cache_lives_in_the_cache_folder_unless_set():
    assert PathsConfig().llm_cache == "${paths.cache_dir}/llm_calls.sqlite"
    config = OmegaConf.create({"paths": dataclasses.asdict(PathsConfig(cache_dir="/runs/cache"))})
    assert config.paths.llm_cache == "/runs/cache/llm_calls.sqlite"
    config = OmegaConf.create({"paths": dataclasses.asdict(PathsConfig(llm_cache="/shared/calls.sqlite"))})
    assert config.paths.llm_cache == "/shared/calls.sqlite"


def test_a_configuration_runs_its_one_retriever_or_its_combinations_members():
    knn, dps, bm25 = object(), object(), object()
    single = OPIConfig(retriever=knn, retrievers={"knn": knn, "dps": dps}, combination=Single())
    assert single.single and single.members() == {"retriever": knn}
    fusion = OPIConfig(retriever=knn, retrievers={"knn": knn, "dps": dps, "bm25": bm25},
                       combination=RankFusion(members=["bm25", "knn"]))
    assert not fusion.single and fusion.members() == {"bm25": bm25, "knn": knn}
    assert list(fusion.members()) == ["bm25", "knn"]  # in the combination's order
