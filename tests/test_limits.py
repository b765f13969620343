"""`puffer_core.specs.limits`: typos (an extra zero, a minus sign, nan) are one-line errors naming the setting."""

from __future__ import annotations

import numpy as np
import pytest

from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import MAX_ENVS, MAX_SECONDS, check_int, check_number


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "num_envs must be ≥ 1 and ≤ 65,536, got 0"),
        (10**8, "num_envs must be ≥ 1 and ≤ 65,536, got 100,000,000"),
        (2.0, "num_envs must be an int ≥ 1 and ≤ 65,536, got 2.0"),
        (True, "num_envs must be an int ≥ 1 and ≤ 65,536, got True"),
        ("8", "num_envs must be an int ≥ 1 and ≤ 65,536, got '8'"),
    ],
)
def test_bad_ints_are_named_with_their_range(value, message):
    with pytest.raises(APIUsageError) as caught:
        check_int("num_envs", value, 1, MAX_ENVS)
    assert str(caught.value) == message


def test_ints_of_any_kind_within_range_pass():
    assert check_int("n", np.int64(3), 1, 4) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_int("seed", 0, 0) == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 0, -1.0, MAX_SECONDS * 2, "60", None])
def test_bad_timeouts_are_refused(value):
    with pytest.raises(APIUsageError, match=r"timeout must be a number in \(0, 604800\], got"):
        check_number("timeout", value, 0, MAX_SECONDS, low_open=True)


def test_numbers_of_any_kind_within_range_pass():
    assert check_number("t", np.float32(0.5), 0, 1) == 0.5
    assert check_number("t", 1, 0, 1) == 1.0
    assert check_number("c", 5.0, 0) == 5.0
    with pytest.raises(APIUsageError, match="c must be a finite number ≥ 0, got -5"):
        check_number("c", -5, 0)


def test_the_predicates_behind_the_checks():
    from puffer_core.specs.limits import int_in, number_in

    assert int_in(np.int64(3), 1, 4) and int_in(0, 0) and int_in(2**62 - 1, 0, 2**62 - 1)
    assert not any(int_in(value, 1, 4) for value in (0, 5, True, 2.0, "2", None))
    assert number_in(1000, 0, 1000, low_open=True) and number_in(np.float32(0.5), 0, 1) and number_in(-3.0)
    assert not any(number_in(value, 0, 1000, low_open=True) for value in (0, 1000.5, float("nan"), False, "5"))


@pytest.mark.parametrize("value", ["no", 0, 1, None, np.bool_(True)])
def test_flags_are_true_or_false_only(value):
    from puffer_core.specs.limits import check_flag

    with pytest.raises(APIUsageError, match=r"^check_actions must be True or False, got "):
        check_flag("check_actions", value)
    assert check_flag("check_actions", False) is False


def test_large_bounds_read_as_people_write_them():
    from puffer_core.specs.limits import MAX_SPIN_US

    with pytest.raises(APIUsageError, match=r"^spin_us must be a number in \[0, 1,000,000\], got 1000000000000.0$"):
        check_number("spin_us", 1e12, 0, MAX_SPIN_US)
    with pytest.raises(APIUsageError, match=r"^t must be a number in \[0.5, 1e-07\], got nan$"):
        check_number("t", float("nan"), 0.5, 1e-7)
