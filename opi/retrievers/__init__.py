"""The seven retrievers of the paper, LangChain's, and the random and oracle bounds, behind one interface (see
``base.Retriever``)."""
from opi.retrievers.base import Ranking, Retriever
from opi.retrievers.bounds import OracleRetriever, RandomRetriever
from opi.retrievers.dense import DPSRetriever, KNNRetriever, MMRRetriever
from opi.retrievers.edi import EDIRetriever
from opi.retrievers.lexical import BM25Retriever, TFIDFRetriever
from opi.retrievers.svm import SVMRetriever

__all__ = ["Ranking", "Retriever", "DPSRetriever", "KNNRetriever", "BM25Retriever", "SVMRetriever",
           "TFIDFRetriever", "MMRRetriever", "EDIRetriever", "RandomRetriever", "OracleRetriever"]
