"""Forwarding alias for console scripts installed before 0.2 (``flows.annotate:main``): ``opi-annotate``."""
from flows.cli.annotate import main  # noqa: F401
