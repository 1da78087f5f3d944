"""Open every page of the built book in Chromium and check what a reader would see.

Run after building the book (see conftest.py):
    .venv/bin/python -m pytest tests/browser -p no:cacheprovider
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 15_000
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Sphinx 7.4 emits inline scripts added after builder init twice, so sphinx-thebe's `const`
# declaration runs twice on every page (fixed upstream in sphinx-doc/sphinx#13402, Sphinx 8.2,
# which Jupyter Book 1 cannot use). Harmless, since thebe is off; any other error still fails.
KNOWN_PAGE_ERRORS = {"Identifier 'THEBE_JS_URL' has already been declared"}
# Jupyter Book's index.html only redirects to the root page.
_META_REFRESH = re.compile(
    r"""<meta\s+http-equiv=["']refresh["']\s+content=["']\d+;\s*url=([^"']+)["']""", re.I
)
# Pages every build of the book has; their screenshots land in _build/test-artifacts/.
SCREENSHOT_PAGES = {
    "chapter1": "chapters/01_masks_and_positions.html",
    "scoreboard": "scoreboard.html",
}

# Waits for MathJax's initial typesetting and then for web fonts, so that every request the page
# makes has been issued before the checks run. Returns what became of MathJax.
_SETTLE_JS = """
async (timeoutMs) => {
  const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), timeoutMs));
  const mj = window.MathJax;
  let state = "absent";
  if (mj && mj.startup && mj.startup.promise) {
    state = await Promise.race([
      mj.startup.promise.then(() => "done", (err) => "error: " + err),
      timeout,
    ]);
  } else if (mj) {
    state = "config only";
  }
  await Promise.race([document.fonts.ready, timeout]);
  return state;
}
"""

_BROKEN_IMAGES_JS = """
async (timeoutMs) => {
  const images = Array.from(document.images);
  images.forEach((img) => { img.loading = "eager"; });
  const settled = images.map((img) => img.complete ? null : new Promise((resolve) => {
    img.addEventListener("load", resolve);
    img.addEventListener("error", resolve);
  }));
  await Promise.race([
    Promise.all(settled),
    new Promise((resolve) => setTimeout(resolve, timeoutMs)),
  ]);
  return images
    .filter((img) => !(img.naturalWidth > 0 && img.naturalHeight > 0))
    .map((img) => (img.getAttribute("src") || img.currentSrc).slice(0, 120));
}
"""


@dataclass
class OpenedPage:
    page: object = field(repr=False)
    status: int | None = None
    mathjax: str = "absent"
    page_errors: list[str] = field(default_factory=list)
    failed_local: list[str] = field(default_factory=list)
    non_local: list[str] = field(default_factory=list)


def _is_local(url: str) -> bool:
    return urlsplit(url).hostname in LOCAL_HOSTS


@pytest.fixture
def open_page(html_dir, browser, base_url):
    opened_pages = []

    def open_(rel_path: str) -> OpenedPage:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(TIMEOUT_MS)
        opened = OpenedPage(page)
        opened_pages.append(opened)

        def route(route):
            # There is no network here, and the book must not need one: record and refuse.
            if _is_local(route.request.url):
                route.continue_()
            else:
                opened.non_local.append(route.request.url)
                route.abort()

        def on_request_failed(request):
            if _is_local(request.url):
                opened.failed_local.append(f"{request.url} ({request.failure})")

        def on_response(response):
            if _is_local(response.url) and response.status >= 400:
                opened.failed_local.append(f"{response.url} (HTTP {response.status})")

        page.route("**/*", route)
        page.on("pageerror", lambda error: opened.page_errors.append(error.message))
        page.on("requestfailed", on_request_failed)
        page.on("response", on_response)
        url = base_url + rel_path
        response = page.goto(url, wait_until="load")
        opened.status = response.status if response else None
        redirect = _META_REFRESH.search((html_dir / rel_path).read_text(encoding="utf-8"))
        if redirect:
            page.wait_for_url(urljoin(url, redirect.group(1)), wait_until="load")
        opened.mathjax = page.evaluate(_SETTLE_JS, TIMEOUT_MS)
        return opened

    yield open_
    for opened in opened_pages:
        opened.page.close()


@pytest.fixture
def opened(open_page, page_path) -> OpenedPage:
    return open_page(page_path)


def test_page_loads_cleanly(opened: OpenedPage):
    assert opened.status == 200
    assert not opened.non_local, (
        f"the book must work offline, but the page requests {opened.non_local}"
    )
    errors = [error for error in opened.page_errors if error not in KNOWN_PAGE_ERRORS]
    assert not errors, f"JavaScript errors: {errors}"
    assert not opened.failed_local, f"failed local requests: {opened.failed_local}"


def test_images_have_size(opened: OpenedPage):
    broken = opened.page.evaluate(_BROKEN_IMAGES_JS, TIMEOUT_MS)
    assert not broken, f"images that did not load: {broken}"


def test_math_is_typeset(opened: OpenedPage):
    n_math = opened.page.locator(".math").count()
    if n_math == 0:
        return
    assert opened.mathjax != "absent", (
        f"the page has {n_math} math elements but window.MathJax is undefined"
    )
    assert opened.mathjax != "config only", (
        f"the page has {n_math} math elements but MathJax did not load "
        "(is book/_static/mathjax/tex-chtml.js vendored? see tools/vendor_mathjax.sh)"
    )
    assert opened.mathjax == "done", f"MathJax did not finish typesetting: {opened.mathjax}"
    untypeset = opened.page.eval_on_selector_all(
        ".math",
        "els => els.filter(el => !el.querySelector('mjx-container'))"
        ".map(el => el.textContent.trim().slice(0, 80))",
    )
    assert not untypeset, f"math left as TeX source: {untypeset}"
    errors = opened.page.eval_on_selector_all("mjx-merror", "els => els.map(el => el.textContent)")
    assert not errors, f"MathJax could not typeset: {errors}"


def test_glued_values_render(opened: OpenedPage):
    texts = opened.page.eval_on_selector_all(
        "span.pasted-text", "els => els.map(el => el.textContent.trim())"
    )
    bad = [text for text in texts if not text or "<" in text]
    assert not bad, f"glued values that rendered empty or as a repr: {bad}"


@pytest.mark.parametrize("name", SCREENSHOT_PAGES)
def test_screenshot(name: str, open_page, html_dir: Path, pages: list[str]):
    wanted = SCREENSHOT_PAGES[name]
    # The page may sit below a folder of the toc (book/chapters/...), so match on the tail.
    matches = [p for p in pages if p == wanted or p.endswith("/" + wanted)]
    assert len(matches) == 1, f"expected one page ending in {wanted}, found {matches}"
    opened = open_page(matches[0])
    assert opened.status == 200
    target = html_dir.parent / "test-artifacts" / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    opened.page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0
