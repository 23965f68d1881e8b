"""Forwarding alias for console scripts installed before 0.2 (``flows.label:main``): ``opi-label``."""
from flows.cli.label import main  # noqa: F401
