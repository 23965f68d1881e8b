"""The seven retrievers of the paper, LangChain's, and the random and oracle bounds, behind one interface (see
``base.Retriever``). Each is imported when it is first used (``from opi.retrievers import BM25Retriever``, or its
module by name): a result is keyed on the modules it imports (``flows.orchestration.code``), and importing this
package must not make BM25's rankings depend on the SVM's module."""
from __future__ import annotations

import importlib
from typing import Any

from opi.retrievers.base import Ranking, Retriever

MODULES = {"OracleRetriever": "bounds", "RandomRetriever": "bounds", "DPSRetriever": "dense", "KNNRetriever": "dense",
           "MMRRetriever": "dense", "EDIRetriever": "edi", "BM25Retriever": "lexical", "TFIDFRetriever": "lexical",
           "SVMRetriever": "svm"}

__all__ = ["Ranking", "Retriever", "DPSRetriever", "KNNRetriever", "BM25Retriever", "SVMRetriever",
           "TFIDFRetriever", "MMRRetriever", "EDIRetriever", "RandomRetriever", "OracleRetriever"]


def __getattr__(name: str) -> Any:
    if name not in MODULES:
        raise AttributeError(f"module 'opi.retrievers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"opi.retrievers.{MODULES[name]}"), name)
