"""OPI: intrinsic evaluation of retrievers for deep-logic RAG questions (BERTSim, LRCR, OPI)."""

__version__ = "0.1.0"
