"""A chapter's papermill parameters: a bad one is named with the valid values, before any cell runs."""

import pytest

from companion.book.parameters import check_parameters
from companion.config import PROFILES


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("seeds", [[0, 1, 2, 3, 4], (7,), [3, 0]])
def test_good_parameters_pass(profile, seeds):
    assert check_parameters(profile, seeds) is None
    assert check_parameters(profile) is None  # a chapter without seeds


FIX = r'give a non-empty list of distinct integers >= 0, e.g. -y "seeds: \[0, 1, 2\]"\.$'


@pytest.mark.parametrize("args, message", [
    (("nonsense", [0]), r"^profile='nonsense' is not a profile; valid: ci, paper \(ci: .*-p profile ci\.$"),
    ((None, [0]), r"^profile=None is not a profile; valid: ci, paper"),
    (("ci", []), r"^seeds=\[\] names no run; " + FIX),
    (("ci", "0-4"), r"^seeds='0-4' is not a list of seeds; " + FIX),
    (("ci", 3), r"^seeds=3 is not a list of seeds; " + FIX),
    (("ci", [0, -1, 2.0, True]), r"^seeds=\[0, -1, 2.0, True\] holds \[-1, 2.0, True\], which are not "
                                       r"integers >= 0; " + FIX),
    (("ci", [0, 1, 1, 0]), r"^seeds=\[0, 1, 1, 0\] repeats \[0, 1\]: a seed is one run"),
])
def test_a_bad_parameter_is_named_with_the_valid_values(args, message):
    with pytest.raises(ValueError, match=message):
        check_parameters(*args)
