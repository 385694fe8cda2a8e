"""`inv exec --timeout`: a positive, finite number of seconds, refused in one line naming the option."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.host import execute


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "inf", "nan", "1e999", "1e300", "86401"])
def test_a_timeout_is_a_positive_finite_number_of_seconds(bad):
    with pytest.raises(InputError, match=r"^--timeout '"):
        execute.parse_timeout(bad)


def test_no_timeout_is_the_finite_default():
    assert execute.parse_timeout(None) == execute.parse_timeout("") == execute.DEFAULT_TIMEOUT_S == 120
    assert execute.parse_timeout("0.5") == 0.5
