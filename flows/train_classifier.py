"""Forwarding alias for console scripts installed before 0.2 (``flows.train_classifier:main``):
``opi-train-classifier``."""
from flows.cli.train_classifier import main  # noqa: F401
