"""A chapter's papermill parameters: a bad one is named with the valid values, before any cell runs."""

import pytest

from companion.book.parameters import check_parameters
from companion.config import PROFILES


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("seeds, jobs", [([0, 1, 2, 3, 4], None), ((7,), 2), ([3, 0], 1)])
def test_good_parameters_pass(profile, seeds, jobs):
    assert check_parameters(profile, seeds, jobs) is None
    assert check_parameters(profile) is None  # a chapter without seeds or jobs


FIX = r'give a non-empty list of distinct integers >= 0, e.g. -y "seeds: \[0, 1, 2\]"\.$'


@pytest.mark.parametrize("args, message", [
    (("nonsense", [0], None), r"^profile='nonsense' is not a profile; valid: ci, paper \(ci: .*-p profile ci\.$"),
    ((None, [0], None), r"^profile=None is not a profile; valid: ci, paper"),
    (("ci", [], None), r"^seeds=\[\] names no run; " + FIX),
    (("ci", "0-4", None), r"^seeds='0-4' is not a list of seeds; " + FIX),
    (("ci", 3, None), r"^seeds=3 is not a list of seeds; " + FIX),
    (("ci", [0, -1, 2.0, True], None), r"^seeds=\[0, -1, 2.0, True\] holds \[-1, 2.0, True\], which are not "
                                       r"integers >= 0; " + FIX),
    (("ci", [0, 1, 1, 0], None), r"^seeds=\[0, 1, 1, 0\] repeats \[0, 1\]: a seed is one run"),
    (("ci", [0], 0), r"^jobs=0 is not a number of processes; valid: None \(one per core\) or an integer >= 1"),
    (("ci", [0], "2"), r"^jobs='2' is not a number"),
    (("ci", [0], True), r"^jobs=True is not a number"),
])
def test_a_bad_parameter_is_named_with_the_valid_values(args, message):
    with pytest.raises(ValueError, match=message):
        check_parameters(*args)
