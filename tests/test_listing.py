"""Listings show the package's own source, the span asked for, and name a missing marker."""

import inspect

import pytest

from companion.book.listing import listing, source_span
from companion.priors import LearnableMask


def test_the_span_is_the_source_from_start_to_stop_with_its_line_numbers():
    path, code, a, b = source_span(LearnableMask.forward, start="logits = self.logits", stop="return F.logsigmoid")
    lines, first = inspect.getsourcelines(LearnableMask.forward)
    assert path == "companion/priors.py"
    assert code.splitlines()[0] == "logits = self.logits" and code.splitlines()[-1] == "return F.logsigmoid(logits[..., :i, :j])"
    assert lines[a - first].strip() == "logits = self.logits" and lines[b - first].strip().startswith("return F.logsigmoid")


def test_a_marker_that_is_not_in_the_source_is_named():
    with pytest.raises(ValueError, match="no line containing 'not in the code'"):
        source_span(LearnableMask.forward, start="not in the code")


def test_the_listing_is_a_python_block_headed_by_its_place():
    text = listing(LearnableMask.forward, start="logits = self.logits").data
    assert text.startswith("```python\n# companion/priors.py: LearnableMask.forward, lines ") and text.endswith("\n```")
