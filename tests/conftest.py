"""Shared test setup: one torch thread per test (tiny models run fastest and most repeatably so), and
the tiers of tests/tiers.py as markers (`heavy`, `interpreter`)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiers import tier_marks  # noqa: E402


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in tier_marks(item.nodeid):
            item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
