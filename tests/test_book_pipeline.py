"""The book's plumbing: the chapter runner, the ledger and scoreboard, nbval, and consistent pins."""

import copy
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from companion.book.runner import _is_current, _stamp, input_hash, source_outputs, strip_volatile, toc_chapters
from companion.book.claims import load_ledger, record, verdict
from companion.book.scoreboard import build, collect_measures

ROOT = Path(__file__).resolve().parents[1]
CHAPTER1 = ROOT / "book" / "chapters" / "01_masks_and_positions.ipynb"


def test_toc_lists_chapter_one_and_every_chapter_has_source_and_executed_copy():
    names = toc_chapters(ROOT)
    assert names[0] == "01_masks_and_positions"
    for n in names:
        assert (ROOT / "notebooks" / f"{n}.ipynb").is_file()
        assert (ROOT / "book" / "chapters" / f"{n}.ipynb").is_file()


def test_sources_carry_no_outputs_and_the_check_catches_one(tmp_path):
    assert source_outputs(ROOT) == []
    (tmp_path / "notebooks").mkdir()
    nb = json.loads((ROOT / "notebooks" / "01_masks_and_positions.ipynb").read_text())
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    (tmp_path / "notebooks" / "bad.ipynb").write_text(json.dumps(nb))
    assert source_outputs(tmp_path) == ["notebooks/bad.ipynb"]


def test_executed_chapters_are_current_and_stripped():
    for n in toc_chapters(ROOT):
        nb = json.loads((ROOT / "book" / "chapters" / f"{n}.ipynb").read_text())
        assert nb["metadata"]["companion"]["input_hash"] == input_hash(ROOT, n, nb["metadata"]["companion"]["profile"]), (
            f"{n} is stale: re-run `companion chapters {n}` and commit book/chapters/{n}.ipynb")
        assert set(nb["metadata"].get("papermill", {})) <= {"parameters", "default_parameters"}
        for cell in nb["cells"]:
            assert not {"papermill", "execution", "ExecuteTime"} & set(cell.get("metadata", {}))
            for out in cell.get("outputs", []):
                assert out.get("name") != "stderr", f"{n} writes to stderr: {''.join(out['text'])[:300]}"
                assert out.get("output_type") != "error"


def test_strip_volatile_keeps_outputs_glue_and_parameters():
    nb = {
        "metadata": {"papermill": {"parameters": {"profile": "ci"}, "start_time": "t", "duration": 1.0,
                                   "input_path": "/x", "environment_variables": {}}},
        "cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"], "papermill": {"duration": 2},
                                                     "execution": {"iopub.status.idle": "t"}},
                   "outputs": [{"output_type": "display_data", "data": {"application/papermill.record/text/plain": "1"},
                                "metadata": {"scrapbook": {"name": "a"}}}]}],
    }
    nb["cells"].append({"cell_type": "code", "id": "3f9a1c2e", "metadata": {"tags": ["injected-parameters"]},
                        "outputs": [], "source": "profile = 'paper'"})
    out = strip_volatile(copy.deepcopy(nb))
    assert out["cells"][1]["id"] == "injected-parameters"
    assert out["metadata"]["papermill"] == {"parameters": {"profile": "ci"}}
    assert out["cells"][0]["metadata"] == {"tags": ["parameters"]}
    assert out["cells"][0]["outputs"] == nb["cells"][0]["outputs"]


def test_input_hash_changes_with_source_and_profile(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "claims.yml").write_text("[]\n")
    src = json.loads((ROOT / "notebooks" / "01_masks_and_positions.ipynb").read_text())
    path = tmp_path / "notebooks" / "ch.ipynb"
    path.write_text(json.dumps(src))
    base = input_hash(tmp_path, "ch", "ci")
    assert input_hash(tmp_path, "ch", "ci") == base
    assert input_hash(tmp_path, "ch", "paper") != base
    src["cells"][0]["source"] = "# changed"
    path.write_text(json.dumps(src))
    changed = input_hash(tmp_path, "ch", "ci")
    assert changed != base
    # a committed measurement the chapters read (Chapter 10) is part of what they depend on
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "attention-x.json").write_text("{}")
    assert input_hash(tmp_path, "ch", "ci") != changed


# ---------------------------------------------------------------- claims and scoreboard


@pytest.mark.parametrize("rule, measure, expected", [
    ({"kind": "holds"}, True, "reproduced"),
    ({"kind": "holds"}, False, "not reproduced"),
    ({"kind": "at_most", "threshold": 1e-12}, 3e-16, "reproduced"),
    ({"kind": "at_most", "threshold": 1e-12, "partly_threshold": 1e-6}, 1e-8, "partly"),
    ({"kind": "at_most", "threshold": 1e-12}, 1e-8, "not reproduced"),
    ({"kind": "at_least", "threshold": 0.5}, 0.75, "reproduced"),
    ({"kind": "at_least", "threshold": 0.5}, 0.25, "not reproduced"),
    ({"kind": "close", "target": 1.0, "tol": 0.01, "partly_tol": 0.1}, 1.05, "partly"),
    ({"kind": "close", "target": 1.0, "tol": 0.01}, 1.005, "reproduced"),
    ({"kind": "close", "target": 0.0, "tol": 0.0}, float("nan"), "not reproduced"),
    ({"kind": "equals", "value": "b"}, "b", "reproduced"),
    ({"kind": "at_least", "threshold": 0.5}, None, "not run at this scale"),
])
def test_verdict_rules(rule, measure, expected):
    assert verdict(rule, measure) == expected


def test_ledger_rejects_bad_entries(tmp_path):
    good = yaml.safe_load((ROOT / "book" / "claims.yml").read_text())
    for mutate, message in [
        (lambda r: r[0].pop("rule"), "misses"),
        (lambda r: r[0].update(rule={"kind": "sometimes"}), "kind"),
        (lambda r: r[0].update(rule={"kind": "at_most"}), "threshold"),
        (lambda r: r.append(dict(r[0])), "twice"),
        (lambda r: r[0].update(colour="red"), "unknown"),
    ]:
        rows = copy.deepcopy(good)
        mutate(rows)
        p = tmp_path / "claims.yml"
        p.write_text(yaml.safe_dump(rows))
        with pytest.raises(ValueError, match=message):
            load_ledger(p)


def test_record_unknown_claim_is_named():
    with pytest.raises(KeyError, match="S9-99"):
        record("S9-99", 1.0, ledger=load_ledger(ROOT / "book" / "claims.yml"))


def test_scoreboard_is_current_and_complete():
    page, js = build(ROOT)
    assert (ROOT / "book" / "scoreboard.md").read_text() == page, "run `companion scoreboard` and commit"
    assert (ROOT / "book" / "chapters" / "scoreboard.json").read_text() == js
    doc = json.loads(js)
    ids = {c["id"] for c in doc["claims"]}
    assert ids == set(load_ledger(ROOT / "book" / "claims.yml"))
    for c in doc["claims"]:
        assert set(c) >= {"id", "source", "location", "statement", "source_value", "ours", "profile", "rule", "verdict", "chapter"}
    measured = collect_measures(ROOT / "book" / "chapters")
    assert {k for k in measured if k.startswith("S1-")} == {k for k in ids if k.startswith("S1-")}


# ---------------------------------------------------------------- nbval


def _nbval(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg"), str(path), "-q"],
        cwd=path.parent, capture_output=True, text=True, env={**os.environ, "COMPANION_ROOT": str(ROOT)},
    )


def test_nbval_fails_when_a_checked_output_changes(tmp_path):
    nb = json.loads(CHAPTER1.read_text())
    target = None
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/plain", []))
            if "'S1-01': 'reproduced'" in text:
                target = out
    assert target is not None, "chapter 1 lost its verdict summary output"
    good = tmp_path / "good.ipynb"
    good.write_text(json.dumps(nb))
    text = "".join(target["data"]["text/plain"])
    target["data"]["text/plain"] = text.replace("'S1-01': 'reproduced'", "'S1-01': 'not reproduced'")
    bad = tmp_path / "bad.ipynb"
    bad.write_text(json.dumps(nb))
    ok, fail = _nbval(good), _nbval(bad)
    assert ok.returncode == 0, ok.stdout[-2000:]
    assert fail.returncode == 1 and "not reproduced" in fail.stdout, fail.stdout[-2000:]


# ---------------------------------------------------------------- environment


def _names(reqs):
    out = {}
    for r in reqs:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", r)
        out[m.group(1).lower().replace("_", "-")] = m.group(2).replace(" ", "")
    return out


def test_environment_yml_and_pyproject_name_the_same_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip = set().union(project["dependencies"], *project["optional-dependencies"].values())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _names(pip) == _names([r for r in conda_pip if not r.startswith("-e")])
    pins = _names(pip)
    assert pins["torch"] == "==2.14.1" and pins["torchvision"] == "==0.29.1"
    assert pins["jupyter-book"] == ">=1.0.4.post1,<2"


def test_a_chapter_counts_as_current_only_when_executed_in_this_checkout(tmp_path):
    name = "01_masks_and_positions"
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    nb = json.loads(CHAPTER1.read_text())
    (tmp_path / "book" / "chapters" / f"{name}.ipynb").write_text(json.dumps(nb))
    digest = nb["metadata"]["companion"]["input_hash"]
    assert not _is_current(tmp_path, name, "ci", digest)  # a fresh clone: no local stamp
    stamp = _stamp(tmp_path, name, "ci")
    stamp.parent.mkdir(parents=True)
    stamp.write_text(digest + "\n")
    assert _is_current(tmp_path, name, "ci", digest)
    assert not _is_current(tmp_path, name, "ci", "0" * 64)  # inputs changed
    assert not _is_current(tmp_path, name, "paper", digest)
