"""The range check of every float setting, of a config group (``opi.schemas``) or of a component: its own module,
so that a component's cache key does not follow the schemas' defaults."""
from __future__ import annotations

import math
import operator
from typing import Any


def require_number(name: str, value: Any, *, gt: float | None = None, ge: float | None = None,
                   lt: float | None = None, le: float | None = None, null: bool = False) -> None:
    """``value`` a finite number within the bounds given (``gt`` > , ``ge`` >=, ``lt`` <, ``le`` <=), or None where
    ``null``; else a ValueError naming the setting and its range: ``k1 must be a finite number >= 0, got nan``. Every
    float setting, of a config group or of a component, is checked by this one function."""
    if value is None and null:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if number and all(bound is None or check(value, bound) for bound, check in
                      ((gt, operator.gt), (ge, operator.ge), (lt, operator.lt), (le, operator.le))):
        return
    low = f"({gt}" if gt is not None else f"[{ge}" if ge is not None else None
    high = f"{lt})" if lt is not None else f"{le}]" if le is not None else None
    bounds = (f" in {low}, {high}" if low and high else f" {'>' if gt is not None else '>='} {low[1:]}" if low
              else f" {'<' if lt is not None else '<='} {high[:-1]}" if high else "")
    raise ValueError(f"{name} must be a finite number{bounds}{' or null' if null else ''}, got {value!r}")


def require_numbers(name: str, values: Any, **bounds: float) -> None:
    """Each of ``values`` (a list setting) as ``require_number`` checks one."""
    for value in values or ():
        require_number(name, value, **bounds)
