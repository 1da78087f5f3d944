"""The paper profile never trains by surprise: chapters only read, the paper edition is built from
the committed records, and training asked for without a GPU states its cost and waits for a second word."""

import json
import shutil
from pathlib import Path


from companion.book import runner
from companion.book.site.edition import build_edition, not_run_notebook
from companion.reading import MissingRuns

ROOT = Path(__file__).resolve().parents[1]
CH3 = "03_boolean_extrapolation"


def test_no_chapter_takes_a_training_parameter():
    """A chapter reads at either profile: its parameters cell names no `train` or `jobs` (training is a
    command of its own: `companion chapters`, `sweep`, `paper`)."""
    for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(source.read_text())["cells"]
        [params] = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        names = {line.split("=")[0].strip() for line in "".join(params["source"]).splitlines() if "=" in line}
        assert "profile" in names and not names & {"train", "jobs"}, source.name


def test_missing_runs_show_as_one_line_in_a_notebook():
    err = MissingRuns("3 of 5 runs are not in results/paper", 2, 5, [])
    assert err._render_traceback_() == ["MissingRuns: 3 of 5 runs are not in results/paper"]


def _tree(tmp_path: Path) -> Path:
    """A copy of what the edition reads: sources, pages, ledger, config, an empty paper store."""
    for name in ("notebooks", "book"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("*.ipynb") if name == "book" else None)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "results" / "paper").mkdir(parents=True)
    return tmp_path


def test_a_chapter_without_its_paper_runs_gets_a_page_that_says_so_and_keeps_its_labels(tmp_path):
    root = _tree(tmp_path)
    nb = not_run_notebook(root, CH3, "paper")
    text = "\n".join(c["source"] for c in nb["cells"])
    assert text.startswith("(ch3)=\n# Extrapolating Boolean functions\n")
    assert "reads 120 runs at the `paper` profile; 0 of them are in `results/paper/`" in text
    assert "`companion paper 03`" in text and "| S2-06 |" in text and "not run at this scale |" in text
    source = json.loads((root / "notebooks" / f"{CH3}.ipynb").read_text())
    labels = {line[1:-2] for c in source["cells"] if c["cell_type"] == "markdown"
              for line in "".join(c["source"]).splitlines() if line.startswith("(") and line.endswith(")=")}
    assert labels and all(f"({label})=" in text for label in labels)  # links into the chapter still resolve
    assert nb["metadata"]["companion"] == {"profile": "paper", "not_run": [0, 120]}


def test_the_edition_trains_nothing_and_leaves_the_ci_book_alone(tmp_path, monkeypatch, capsys):
    root = _tree(tmp_path)

    def no(*args, **kwargs):
        raise AssertionError("the edition trained or executed a chapter whose runs are missing")

    monkeypatch.setattr(runner, "train_runs", no)
    monkeypatch.setattr(runner, "execute_into", no)
    assert runner.run_chapters([CH3], profile="paper", root=root) == 0
    out = capsys.readouterr().out
    assert f"{CH3:<40} not run at this scale: 0 of 120 paper-profile runs stored" in out
    page = root / "_build" / "editions" / "paper" / "book" / "chapters" / f"{CH3}.ipynb"
    assert json.loads(page.read_text())["metadata"]["companion"]["not_run"] == [0, 120]
    assert not list((root / "book" / "chapters").glob("*.ipynb"))  # the ci chapters are not written
    cfg = (root / "_build" / "editions" / "paper" / "_config.yml").read_text()
    assert 'title: "Attention Priors, Reproduced (paper edition)"' in cfg
    assert build_edition([CH3], "paper", root, execute_into=no) == 0  # again: the folder is remade, not appended to


def test_training_at_paper_without_a_gpu_states_its_cost_and_waits_for_yes(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    probed = []

    def estimate(group):
        probed.append(group)
        return {"seconds": 36.0}

    before = sorted(p.name for p in (ROOT / "results" / "paper").iterdir())
    assert runner.train_paper(["09_extrapolation"], "paper", estimate=estimate) == 2  # 08's records are all here
    err = capsys.readouterr().err
    assert err.startswith("20 runs in 10 groups are missing at profile 'paper'. This machine has no GPU: ")
    assert "the first group, charlm/goat seeds 0,1,2" in err and "probed at 36 s" in err
    assert "`companion paper 09`" in err and "repeat the command with --yes" in err
    assert len(probed) == 1  # one probe, the other groups scaled
    assert sorted(p.name for p in (ROOT / "results" / "paper").iterdir()) == before  # nothing trained


def test_the_edition_copies_what_its_pages_include_from_outside_book(tmp_path):
    """book/changelog.md includes ../CHANGELOG.md: the edition, a copy of book/, carries the file beside it (a page
    including nothing from outside, or a file outside the checkout, adds nothing)."""
    from companion.book.site.edition import prepare

    root = tmp_path / "repo"
    (root / "book" / "sub").mkdir(parents=True)
    (root / "_toc.yml").write_text("root: book/intro\n")
    (root / "_config.yml").write_text('title: "T"\n')
    (root / "CHANGELOG.md").write_text("# Changes\n")
    (root / "book" / "changelog.md").write_text("# Changelog\n\n```{include} ../CHANGELOG.md\n```\n")
    (root / "book" / "sub" / "page.md").write_text("```{include} ../../../elsewhere.md\n```\n")
    (tmp_path / "elsewhere.md").write_text("outside the checkout\n")
    dest = prepare(root, "paper")
    assert (dest / "CHANGELOG.md").read_text() == "# Changes\n"
    assert not (dest.parent / "elsewhere.md").exists() and not (dest / "elsewhere.md").exists()
