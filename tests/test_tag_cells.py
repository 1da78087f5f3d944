"""The cell convention (companion/book/site/cells.py, applied by tools/tag_cells.py): every chapter source
follows it, and the rules give the tags they promise."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from companion.book.site.cells import MANAGED, RERUN_ID, classify, plan, rerun_note

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_source_follows_the_convention(path):
    nb = json.loads(path.read_text())
    assert plan(nb, path.stem) == nb, f"run tools/tag_cells.py: {path.name} does not follow the cell convention"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    params = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and "remove-cell" in params[0]["metadata"]["tags"]
    note = [c for c in nb["cells"] if c.get("id") == RERUN_ID]
    assert len(note) == 1 and nb["cells"].index(note[0]) == 1, "the rerun note follows the title cell"
    text = "".join(note[0]["source"])
    assert f"papermill notebooks/{path.stem}.ipynb" in text
    assert "-p profile ci" in text and "-p profile paper" in text
    for c in code:
        src = "".join(c["source"])
        tags = c["metadata"].get("tags", [])
        if src.strip().startswith("{r.id: r.verdict"):
            assert "remove-cell" in tags  # still executed and checked by nbval, never shown
        if "glue_all(" in src or "glue(" in src:
            assert set(tags) & set(MANAGED), f"a cell that glues is shown in full: {src[:80]}"


@pytest.mark.parametrize("source, tags, expected", [
    ("profile = 'ci'", ["parameters"], {"remove-cell"}),
    ("glue_all(ch.numbers(x))", [], {"remove-cell"}),
    ("results = record_all(ch.claims(x))\nglue_all(ch.numbers(x))", ["nbval-ignore-output"], {"remove-cell"}),
    ("results += record_all(a, details=b)", [], {"remove-cell"}),
    ("{r.id: r.verdict for r in results}", [], {"remove-cell"}),
    ("glue_all(ch.verdict_numbers(results, seeds))\n{r.id: r.verdict for r in results}", [], {"remove-cell"}),
    ("ch.table(x)\n{r.id: r.verdict for r in results}", [], {"hide-input"}),
    ("verdict_table(results)", [], {"remove-input"}),
    ("results = record_all(m)\nglue_all(n)\nch.table(x)", [], {"remove-input"}),
    ("import numpy as np\nfrom companion.book.chapters import plots\ncheck_parameters(profile)\nplots.use_style()", [], {"remove-input"}),
    ("fig, ax = plt.subplots()\nax.plot([1])\nplt.show()", [], {"hide-input"}),
    ("x = ch.load()\nglue('a', 1)\nch.table(x)", [], {"hide-input"}),
    ("ch.table1(frame, refs)", [], {"hide-input"}),  # a helper call: its table is what the page shows
    ("contrasts = [0.5, 1, 2]\nsat = ch.saturation(contrasts)\nch.table(sat)", [], set()),  # inputs as literals: shown
    ("cases = ch.blocking_cases((2.0, 1.0))\nch.blocking_table(cases)", [], set()),
    ("ratios, factor = ch.renormalisation(cases)\nch.show(ratios[0], factor)", [], {"hide-input"}),  # an index states no input
    ("t3m = ch.table3_measures(frame)\nfixed = ch.fixed_vs_learnable(frame)", [], {"hide-input"}),
    ("listing(attention._eager)", [], {"remove-input"}),
    ("from companion.priors import LearnableMask\nlisting(LearnableMask.forward, start='x')", [], {"remove-input"}),
    ("records, frame = ch.load(profile, seeds)\nprint(f'{len(frame)} runs')", ["nbval-ignore-output"], {"remove-cell"}),
    ("runs = ch.load_qk(profile)\nqk = ch.qk_frame(runs)\nprint(len(qk))", [], {"remove-cell"}),
    ("frame = ch.frame_of(runs)\nprint(frame)", [], {"hide-input"}),  # prints a result, loads nothing
    ("runs = ch.load(profile)\nch.table(runs)", [], {"hide-input"}),  # shows a table: the reader's
    ("if rerun:\n    live = ch.measure(lengths=[1024, 4096])", [], {"hide-input"}),  # the rerunner's, folded
    ("%matplotlib inline", ["hide-input"], {"hide-input"}),  # not Python: left as it is
])
def test_classify(source, tags, expected):
    assert classify(source, tags) == expected


def test_plan_is_idempotent_and_keeps_what_it_does_not_manage():
    nb = {"cells": [
        {"cell_type": "markdown", "id": "t", "metadata": {}, "source": ["(chx)=\n", "# Title"]},
        {"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "source": "profile = 'ci'", "outputs": []},
        {"cell_type": "code", "id": "g", "metadata": {"tags": ["nbval-ignore-output", "hide-input"]},
         "source": "glue_all(x)", "outputs": []},
        {"cell_type": "code", "id": "t2", "metadata": {"tags": ["remove-cell"]}, "source": "ch.table([1, 2])", "outputs": []},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    once = plan(nb, "99_x")
    assert plan(once, "99_x") == once
    assert [c["id"] for c in once["cells"]] == ["t", RERUN_ID, "p", "g", "t2"]
    assert once["cells"][3]["metadata"]["tags"] == ["nbval-ignore-output", "remove-cell"]
    assert "tags" not in once["cells"][4]["metadata"]  # a managed tag the rules do not give is cleared (inputs shown)
    assert "".join(once["cells"][1]["source"]) == rerun_note("99_x")
    assert nb["cells"][2]["metadata"]["tags"] == ["nbval-ignore-output", "hide-input"]  # input untouched


def test_the_script_checks_the_sources():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "tag_cells.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
