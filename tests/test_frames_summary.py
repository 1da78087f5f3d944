"""`frames.run_summary`: one sentence for every chapter's runs, whatever their nesting."""

from types import SimpleNamespace

import pandas as pd

from companion.book.chapters.frames import run_summary


def _rec(wall):
    return SimpleNamespace(wall_time=wall)


def test_run_summary_counts_every_record_at_any_depth(monkeypatch):
    import companion.book.chapters.frames as frames

    monkeypatch.setattr(frames, "records_frame", lambda recs: pd.DataFrame({"wall_time": [r.wall_time for r in recs]}))
    flat = [_rec(1.0), _rec(2.0)]
    assert run_summary(flat) == "2 runs; mean wall time per run 1.5 s"
    assert run_summary({"a": flat, "b": [_rec(6.0)]}) == "3 runs; mean wall time per run 3.0 s"
    assert run_summary({"lm": {"a": flat}, "pk": {"b": [_rec(3.0), _rec(4.0)]}}) == "4 runs; mean wall time per run 2.5 s"
    assert run_summary(pd.DataFrame({"wall_time": [1.0, 4.0]})) == "2 runs; mean wall time per run 2.5 s"
