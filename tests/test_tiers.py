"""The tiers of tests/tiers.py name real tests: every prefix's module exists and, where it names a
test, some test function of that module starts with it (a renamed test cannot leave a tier silently)."""

import re
from pathlib import Path

import pytest

from tiers import HEAVY, INTERPRETER, tier_marks

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("prefix", sorted(set(HEAVY + INTERPRETER)))
def test_every_tier_entry_names_a_test_that_exists(prefix):
    path, _, name = prefix.partition("::")
    assert (ROOT / path).is_file(), f"{prefix}: no such module"
    if name:
        defined = re.findall(r"^def (test_\w+)", (ROOT / path).read_text(), flags=re.M)
        assert any(d.startswith(name.split("[")[0]) for d in defined), f"{prefix}: no test of {path} starts so"


def test_marks_follow_the_prefixes_and_nothing_else():
    assert tier_marks("tests/test_golden.py::test_x[a]") == ["heavy", "interpreter"]
    assert tier_marks("tests/test_runs.py::test_hash_stable_across_processes") == ["heavy", "interpreter"]
    assert tier_marks("tests/test_runs.py::test_git_commit_never_fails") == ["interpreter"]
    assert tier_marks("tests/test_attention.py::test_anything") == []
    assert tier_marks("tests/test_golden_extra.py::test_x") == []  # a module prefix stops at its name
