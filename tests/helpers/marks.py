"""Parametrized cases of which only a few run by default: the rest are marked slow (``python -m pytest -m slow``),
so the default run stays short while CI still runs every case."""
import pytest


def slow_except(cases, default: set[str]) -> list:
    unknown = default - set(cases)
    assert not unknown, f"no such cases: {unknown}"
    return [pytest.param(case, marks=() if case in default else pytest.mark.slow, id=case) for case in cases]
