"""Forwarding alias for console scripts installed before 0.2 (``flows.report:main``): ``opi-report``."""
from flows.cli.report import main  # noqa: F401
