"""The seven retrievers of the paper behind one interface (see ``base.Retriever``)."""
from opi.retrievers.base import Ranking, Retriever, top_k
from opi.retrievers.dense import DPSRetriever, KNNRetriever, MMRRetriever
from opi.retrievers.edi import EDIRetriever
from opi.retrievers.lexical import BM25Retriever, TFIDFRetriever
from opi.retrievers.svm import SVMRetriever

RETRIEVERS = {cls.name: cls for cls in
              (DPSRetriever, KNNRetriever, BM25Retriever, SVMRetriever, TFIDFRetriever, MMRRetriever, EDIRetriever)}

__all__ = ["Ranking", "Retriever", "top_k", "RETRIEVERS", "DPSRetriever", "KNNRetriever", "BM25Retriever",
           "SVMRetriever", "TFIDFRetriever", "MMRRetriever", "EDIRetriever"]
