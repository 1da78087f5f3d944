"""Fixtures for the rendered-book checks: a local HTTP server over the built HTML and one Chromium.

These checks are not part of the unit-test run. They are collected only when this directory (or a
file in it) is named on the command line, after the book has been built:

    jupyter-book build . --all -W -n --keep-going
    .venv/bin/python -m pytest tests/browser -p no:cacheprovider

COMPANION_HTML_DIR points them at another built book (default: <repo>/_build/html), and
COMPANION_CHROMIUM at another Chromium binary (default: `chromium` on PATH, or /usr/bin/chromium).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

BROWSER_TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = BROWSER_TESTS_DIR.parents[1]
HTML_DIR = Path(os.environ.get("COMPANION_HTML_DIR", REPO_ROOT / "_build" / "html")).resolve()

BUILD_FIRST = "build the book first: jupyter-book build . --all -W -n --keep-going"
NO_CHROMIUM = (
    "Chromium not found: install Debian's chromium (apt-get install chromium) "
    "to run the rendered-book checks"
)
CHROMIUM_ARGS = [
    "--no-sandbox",  # the checks run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_SKIPPED_TREES = {"_static", "_sources", "_images"}
_SKIPPED_PAGES = {"genindex.html", "search.html"}


def find_chromium() -> str | None:
    if "COMPANION_CHROMIUM" in os.environ:
        return shutil.which(os.environ["COMPANION_CHROMIUM"])
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def book_pages() -> list[str]:
    """Every content page of the built book, as paths relative to HTML_DIR."""
    pages = []
    for path in sorted(HTML_DIR.rglob("*.html")):
        rel = path.relative_to(HTML_DIR)
        if rel.parts[0] in _SKIPPED_TREES or rel.as_posix() in _SKIPPED_PAGES:
            continue
        pages.append(rel.as_posix())
    return pages


def _explicitly_requested(config: pytest.Config) -> bool:
    for arg in config.args:
        target = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if target == BROWSER_TESTS_DIR or BROWSER_TESTS_DIR in target.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # A plain `pytest` (testpaths = tests) is the unit-test run; keep these checks out of it.
    if BROWSER_TESTS_DIR in collection_path.parents and not _explicitly_requested(config):
        return True
    return None


def pytest_report_header(config: pytest.Config) -> str | None:
    return NO_CHROMIUM if find_chromium() is None else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if find_chromium() is not None:
        return
    for item in items:
        if BROWSER_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.skip(reason=NO_CHROMIUM))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "page_path" in metafunc.fixturenames:
        # Before a build there is nothing to list; index.html then stands in so that every test
        # fails with BUILD_FIRST instead of being skipped for an empty parameter set.
        metafunc.parametrize("page_path", book_pages() or ["index.html"])


@pytest.fixture(scope="session")
def html_dir() -> Path:
    if not (HTML_DIR / "index.html").is_file():
        pytest.fail(f"{HTML_DIR / 'index.html'} does not exist; {BUILD_FIRST}", pytrace=False)
    return HTML_DIR


@pytest.fixture(scope="session")
def pages(html_dir: Path) -> list[str]:
    return book_pages()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def base_url(html_dir: Path):
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
