"""The one range check of every float setting (``opi.checks``): the wording of a refusal for each kind of bound not
already named by ``tests/opi/test_float_ranges.py`` (``<=`` alone, ``[ge, lt)``, none), bounds open or closed at
their ends exactly as written, None allowed only where ``null`` is, booleans and non-finite numbers refused, and a
list setting (``require_numbers``) refused at its first value out of range."""
import math
import re

import pytest

from opi.checks import require_number, require_numbers


@pytest.mark.parametrize("bounds, value, says", [
    (dict(le=1), 1.5, "w must be a finite number <= 1, got 1.5"),
    (dict(ge=0, lt=1), -1, "w must be a finite number in [0, 1), got -1"),
    (dict(gt=0.5), math.inf, "w must be a finite number > 0.5, got inf"),
    (dict(), -math.inf, "w must be a finite number, got -inf"),
    (dict(null=True), "x", "w must be a finite number or null, got 'x'"),
])
def test_each_kind_of_bound_is_named_as_written(bounds, value, says):
    with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
        require_number("w", value, **bounds)


def test_a_bound_is_open_or_closed_at_its_end_as_given():
    require_number("w", 0, ge=0)  # closed: the end itself passes
    require_number("w", 1, le=1)
    for bounds, end in ((dict(gt=0), 0), (dict(lt=1), 1)):  # open: the end itself is refused
        with pytest.raises(ValueError):
            require_number("w", end, **bounds)
    require_number("w", 1e-12, gt=0)  # just inside passes
    require_number("w", 1 - 1e-12, lt=1)


def test_none_passes_only_where_null_is_allowed():
    require_number("w", None, ge=0, null=True)
    with pytest.raises(ValueError, match=r"^w must be a finite number >= 0, got None$"):
        require_number("w", None, ge=0)


@pytest.mark.parametrize("value", [False, True])
def test_a_boolean_is_no_number_even_within_the_range(value):
    with pytest.raises(ValueError, match=f"got {value}$"):
        require_number("w", value, ge=0, le=1)  # False == 0 and True == 1 would pass as numbers


def test_a_list_setting_is_refused_at_its_first_value_out_of_range_and_an_empty_one_passes():
    require_numbers("weights", [0.5, 2, 0], ge=0)
    require_numbers("weights", None, ge=0)  # unset: nothing to check
    require_numbers("weights", [], gt=0)
    with pytest.raises(ValueError, match=r"^weights must be a finite number > 0, got -2$"):
        require_numbers("weights", [1.0, -2, math.nan], gt=0)  # -2 comes before nan
    with pytest.raises(ValueError, match=r"^weights must be a finite number in \[0, 1\], got nan$"):
        require_numbers("weights", [0.25, math.nan], ge=0, le=1)
