"""One version, set in companion/__init__.py: the wheel reads it (pyproject.toml's dynamic version), the book
shows it (the `version` substitution of companion/book/site/sphinxext.py, on the landing page), and CHANGELOG.md's
newest entry is it, with the entries newest first and the changelog a page of the book."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import yaml
from packaging.version import Version

import companion
from companion.book.site import sphinxext

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^## \[?(\d+\.\d+\.\d+)\]? - (\d{4}-\d{2}-\d{2})$", flags=re.M)


def test_the_wheel_takes_its_version_from_the_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "companion.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", companion.__version__)


def test_the_book_is_built_with_the_package_version_as_a_substitution(tmp_path):
    app = SimpleNamespace(confdir=str(ROOT), outdir=str(tmp_path))
    config = SimpleNamespace(html_baseurl="", root_doc="book/intro", myst_substitutions={"other": "kept"},
                             html_context=None)
    sphinxext._inject(app, config)  # what Sphinx calls at config-inited
    assert config.myst_substitutions["version"] == companion.__version__
    assert config.myst_substitutions["other"] == "kept"
    assert "{{ version }}" in (ROOT / "book" / "intro.md").read_text()
    assert companion.__version__ not in (ROOT / "_config.yml").read_text()  # never typed where it could disagree


def test_the_changelog_s_newest_entry_is_this_version_and_its_entries_run_newest_first():
    entries = ENTRY.findall((ROOT / "CHANGELOG.md").read_text())
    assert entries, "CHANGELOG.md has no entry headed '## X.Y.Z - YYYY-MM-DD'"
    assert entries[0][0] == companion.__version__
    versions = [Version(v) for v, _ in entries]
    assert versions == sorted(set(versions), reverse=True)
    assert [d for _, d in entries] == sorted((d for _, d in entries), reverse=True)


def test_the_changelog_is_a_page_of_the_book():
    page = (ROOT / "book" / "changelog.md").read_text()
    assert "```{include} ../CHANGELOG.md" in page
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "book/changelog" in files
