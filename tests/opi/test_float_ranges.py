"""Every float setting has a finite range: each float field of every config group (``opi.schemas``) and of every
component class (the modules ``_target_`` names, and every class a ``conf/`` YAML names) refuses NaN and ±inf when
it is built, naming the setting. Found by introspection, so a float field added without a range fails here."""
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import typing

import pytest

import opi.retrievers
from flows.run.config import COMPONENT_GROUPS, compose_config, component_class, options, typed
from opi import components
from opi.combine import RankFusion
from opi.retrievers.base import Ranking
from opi.retrievers.dense import KNNRetriever
from opi.checks import require_number
from opi.schemas import EmbeddingOverride, EndpointConfig

COMPONENT_MODULES = ["opi.combine", "opi.rerankers", "opi.classify", "opi.llm.reader",
                     *(f"opi.retrievers.{m.name}" for m in pkgutil.iter_modules(opi.retrievers.__path__))]
# a ranking's scores are computed, not set; EndpointConfig is the base of LLMConfig and EmbeddingConfig (its
# fields are tested there)
NOT_SETTINGS = {Ranking, EndpointConfig}
REQUIRED = {RankFusion: {"members": ["knn", "bm25"]}}  # what a class needs besides the field under test


def built(cls: type, **settings):
    """``cls`` with ``settings``; a component's own embedding (``EmbeddingOverride``) as the component holding it
    is built from config, where its settings are checked."""
    if cls is EmbeddingOverride:
        return components.build({"_target_": components.target_of(KNNRetriever), "embedding": settings})
    return cls(**REQUIRED.get(cls, {}), **settings)
BAD = [math.nan, math.inf, -math.inf]


def dataclasses_of(module_name: str) -> set[type]:
    module = importlib.import_module(module_name)
    return {obj for obj in vars(module).values() if inspect.isclass(obj) and dataclasses.is_dataclass(obj)
            and obj.__module__ == module.__name__}


def configured_components() -> set[type]:
    return {cls for group in COMPONENT_GROUPS for option in options(group)
            if (cls := component_class(group, option)) is not None and dataclasses.is_dataclass(cls)}


def float_fields() -> list[tuple[type, str, bool]]:
    """(class, field, whether it is a list) of every float setting."""
    classes = dataclasses_of("opi.schemas").union(*map(dataclasses_of, COMPONENT_MODULES), configured_components())
    found = []
    for cls in sorted(classes - NOT_SETTINGS, key=lambda c: (c.__module__, c.__name__)):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.init and "float" in str(hints[f.name]):
                found.append((cls, f.name, "list" in str(hints[f.name])))
    return found


FIELDS = float_fields()


def test_the_walk_finds_the_float_settings_of_groups_and_components():
    names = {f"{cls.__name__}.{name}" for cls, name, _ in FIELDS}
    assert {"BM25Retriever.k1", "BM25Retriever.b", "SVMRetriever.C", "MMRRetriever.lambda_mult", "RankFusion.c",
            "RankFusion.weights", "LocalRelationClassifier.C", "MetricsConfig.beta", "MetricsConfig.betas",
            "LLMConfig.temperature", "EmbeddingConfig.timeout", "EmbeddingOverride.deadline",
            "DatasetConfig.test_fraction", "TrainConfig.max_poll_seconds"} <= names
    assert len(FIELDS) >= 30


@pytest.mark.parametrize("bad", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("cls, name, is_list", FIELDS, ids=[f"{c.__name__}.{n}" for c, n, _ in FIELDS])
def test_every_float_setting_refuses_what_is_not_a_finite_number(cls, name, is_list, bad):
    built(cls)  # its defaults are in range
    default = getattr(cls(**REQUIRED.get(cls, {})), name)
    value = [bad] * (len(default) if isinstance(default, list) else 2) if is_list else bad
    with pytest.raises(ValueError, match=rf"\b{name} must be a finite number.*, got {re.escape(repr(bad))}"):
        built(cls, **{name: value})


@pytest.mark.parametrize("bounds, value, says", [
    (dict(gt=0), 0, "x must be a finite number > 0, got 0"),
    (dict(ge=0), -0.5, "x must be a finite number >= 0, got -0.5"),
    (dict(lt=1), 1, "x must be a finite number < 1, got 1"),
    (dict(ge=0, le=1), 1.5, "x must be a finite number in [0, 1], got 1.5"),
    (dict(gt=0, lt=1), math.nan, "x must be a finite number in (0, 1), got nan"),
    (dict(gt=0, le=1, null=True), 2, "x must be a finite number in (0, 1] or null, got 2"),
    (dict(), "7", "x must be a finite number, got '7'"),
    (dict(), True, "x must be a finite number, got True"),
])
def test_the_range_a_refusal_names(bounds, value, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        require_number("x", value, **bounds)


@pytest.mark.parametrize("value", [0, 1, 0.5, None])
def test_values_in_range_pass(value):
    require_number("x", value, ge=0, le=1, null=True)


@pytest.mark.parametrize("overrides, says", [
    (["retriever=bm25", "retriever.k1=nan"], "retriever: BM25Retriever: k1 must be a finite number >= 0, got nan"),
    (["retriever=bm25", "retriever.b=inf"], "retriever: BM25Retriever: b must be a finite number in [0, 1], got inf"),
    (["retriever=svm", "retriever.C=inf"], "retriever: SVMRetriever: C must be a finite number > 0, got inf"),
    (["retriever=svm", "retriever.C=nan"], "retriever: SVMRetriever: C must be a finite number > 0, got nan"),
    (["retriever=knn", "retriever.embedding.timeout=nan"],
     "retriever: KNNRetriever: embedding.timeout must be a finite number > 0, got nan"),
    (["setup=a_four", "combination.c=-inf"], "combination: RankFusion: c must be a finite number > 0, got -inf"),
    (["classifier.C=inf"], "classifier: LocalRelationClassifier: C must be a finite number > 0, got inf"),
    (["metrics.similarity.timeout=nan"], "embedding.timeout must be a finite number > 0, got nan"),
    (["llm.temperature=nan"], "llm.temperature must be a finite number >= 0, got nan"),
    (["dataset.test_fraction=inf"], "dataset.test_fraction must be a finite number in (0, 1), got inf"),
])
def test_a_setting_that_is_not_a_finite_number_is_refused_at_compose_time(overrides, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        typed(compose_config(overrides))
