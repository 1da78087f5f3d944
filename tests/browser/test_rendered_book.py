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
# Pages every build of the book has; their screenshots land in _build/screenshots/ (kept by CI).
SCREENSHOT_PAGES = {
    "landing": "intro.html",
    "chapter1": "chapters/01_masks_and_positions.html",
    "scoreboard": "scoreboard.html",
}
SCREENSHOT_DIR = "screenshots"
# Text a reader must never meet in a page: pandas fillers and Python tracebacks. (An exception a
# chapter demonstrates on purpose, such as Chapter 1's empty-row ValueError, is prose, not a traceback.)
_BAD_TEXT = re.compile(r"\bNaN\b|Traceback \(most recent call last\)|error - gate")
_BAD_TEXT_API = re.compile(r"Traceback \(most recent call last\)|error - gate")
# Pages where NaN is the subject, named on purpose: the API reference (inputs the functions refuse) and Chapter 11
# (the traps that produce it); a table cell that is only "NaN" still fails there (_BAD_CELLS)
_NAN_PAGES = ("book/api.html", "book/chapters/11_your_own_model.html")
_BAD_CELLS = {"NaN", "nan", "None", "<NA>", "NaT", "-0.0", "-0.00", "-0"}
VERDICT_CLASSES = ("verdict-reproduced", "verdict-partly", "verdict-not-reproduced", "verdict-inconclusive",
                   "verdict-not-run-at-this-scale", "verdict-reported-not-rebuilt")

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

    def open_(rel_path: str, viewport: dict | None = None) -> OpenedPage:
        page = browser.new_page(viewport=viewport or VIEWPORT)
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
        redirect = _META_REFRESH.search((html_dir / rel_path.split("#")[0]).read_text(encoding="utf-8"))
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


def test_math_in_tables_is_typeset_not_shown_as_tex(opened: OpenedPage):
    """A table header or row label written as \\( … \\) (Chapter 7's bounds, Chapter 1's factor) is
    rendered by MathJax like the prose's math: no TeX delimiter is left in a table's visible text."""
    if opened.mathjax == "absent":
        return
    raw = opened.page.eval_on_selector_all(
        "table th, table td", r"els => els.map(el => el.innerText).filter(t => /\\\(|\\\)|\\[a-zA-Z]+/.test(t))")
    assert not raw, f"table cells showing TeX source: {raw[:5]}"


def test_chapter_7_bounds_are_set_as_math(open_page, pages: list[str]):
    opened = open_page(next(p for p in pages if p.endswith("chapters/07_transport.html")), DESKTOP)
    typeset = opened.page.eval_on_selector_all("#tab-ch7-sensitivity th mjx-container", "els => els.length")
    assert typeset >= 6, f"only {typeset} formulas typeset in the headers of Chapter 7's sensitivity table"


def test_glued_values_render(opened: OpenedPage):
    texts = opened.page.eval_on_selector_all(
        "span.pasted-text", "els => els.map(el => el.textContent.trim())"
    )
    # a repr reads "<pandas.io.formats.style.Styler at 0x…>" or "<IPython.core.display.Markdown object>";
    # a bound reads "< 1e-13" and is a value
    bad = [text for text in texts if not text or re.fullmatch(r"<\S[^>]*>", text) or " object at 0x" in text]
    assert not bad, f"glued values that rendered empty or as a repr: {bad}"
    weights = opened.page.eval_on_selector_all(
        "p span.pasted-text", "els => els.map(el => [el.textContent.trim(), getComputedStyle(el).fontWeight,"
        " getComputedStyle(el.parentElement).fontWeight])")
    heavier = [text for text, own, around in weights if int(own) > int(around)]
    assert not heavier, f"glued numbers set heavier than the prose around them: {heavier[:5]}"


def test_a_percent_sign_sits_a_thin_space_from_its_number(opened: OpenedPage):
    """Prose, captions, glued values and table cells write "87.3\u202f%" (a narrow no-break space);
    code and math keep what they say."""
    found = opened.page.evaluate(r"""() => {
        const skip = 'pre, code, script, style, mjx-container, .math, .MathJax';
        const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        const bad = [];
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            if (n.parentElement && n.parentElement.closest(skip)) continue;
            const m = n.textContent.match(/\S{0,12}\d[ \u00a0\u2009]?%/g);
            if (m) bad.push(...m.filter((t) => !/\d\u202f%$/.test(t)));
        }
        return bad; }""")
    assert not found, f"percentages without a thin no-break space: {found[:8]}"


@pytest.mark.parametrize("name", SCREENSHOT_PAGES)
def test_screenshot(name: str, open_page, html_dir: Path, pages: list[str]):
    wanted = SCREENSHOT_PAGES[name]
    # The page may sit below a folder of the toc (book/chapters/...), so match on the tail.
    matches = [p for p in pages if p == wanted or p.endswith("/" + wanted)]
    assert len(matches) == 1, f"expected one page ending in {wanted}, found {matches}"
    opened = open_page(matches[0])
    assert opened.status == 200
    target = html_dir.parent / SCREENSHOT_DIR / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    opened.page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0


def _visible_text(page) -> str:
    """The article's text as a reader sees it (folded code, inline code spans that name a value on
    purpose, and the source views left out)."""
    return page.evaluate("""() => {
      const main = document.querySelector("article") || document.body;
      const copy = main.cloneNode(true);
      copy.querySelectorAll("details, .cell_input, script, style, .MathJax, mjx-container, code.literal").forEach((el) => el.remove());
      return copy.innerText;
    }""")


def test_no_filler_or_traceback_text(opened: OpenedPage, page_path: str):
    text = _visible_text(opened.page)
    # The API reference quotes the package's docstrings, which name NaN as an input they refuse, and Chapter 11
    # shows which APIs produce it: a word there, not a missing value
    bad = _BAD_TEXT_API if page_path.endswith(_NAN_PAGES) else _BAD_TEXT
    hits = sorted({m.group(0) for m in bad.finditer(text)})
    if hits:
        lines = [line.strip()[:140] for line in text.splitlines() if bad.search(line)][:5]
        pytest.fail(f"a reader meets {hits} on this page: {lines}")
    cells = opened.page.eval_on_selector_all("article td, article th", "els => els.map((el) => el.textContent.trim())")
    bad = sorted({c for c in cells if c in _BAD_CELLS})
    assert not bad, f"table cells that say {bad} (a missing value reads \"—\")"


def test_every_figure_has_a_caption(opened: OpenedPage):
    uncaptioned = opened.page.eval_on_selector_all(
        "article img",
        """els => els.filter((img) => !img.closest("figure") || !img.closest("figure").querySelector("figcaption"))
                    .filter((img) => !img.closest(".sidebar-brand, .navbar-brand, header, .bd-sidebar"))
                    .map((img) => img.getAttribute("src"))""",
    )
    assert not uncaptioned, f"figures without a numbered caption: {uncaptioned}"
    numbers = opened.page.eval_on_selector_all(
        "figure figcaption", "els => els.map((c) => (c.querySelector('.caption-number') || {}).textContent || '')")
    assert all(n.strip().startswith("Fig") for n in numbers), f"captions without a figure number: {numbers}"
    alts = opened.page.eval_on_selector_all("article figure img", "els => els.map((i) => i.getAttribute('alt') || '')")
    bad = [a for a in alts if not a.strip() or a.endswith(".png") or "/" in a.split(" ")[0]]
    assert not bad, f"images whose alt text does not describe them: {bad}"


def test_claim_links_resolve(html_dir: Path, pages: list[str]):
    """Every link to a claim's anchor (chapter verdict tables, the landing page, the scoreboard itself)
    points at an element that exists, and every claim of the scoreboard has its anchor."""
    import json

    ids_by_page: dict[str, set[str]] = {}

    def ids(page: str) -> set[str]:
        if page not in ids_by_page:
            text = (html_dir / page).read_text(encoding="utf-8")
            ids_by_page[page] = set(re.findall(r'\bid="([^"]+)"', text))
        return ids_by_page[page]

    scoreboard = next(p for p in pages if p.endswith("scoreboard.html"))
    claims = json.loads((html_dir.parents[1] / "book" / "chapters" / "scoreboard.json").read_text())["claims"]
    missing = [c["id"] for c in claims if c["anchor"].lower() not in ids(scoreboard)]
    assert not missing, f"claims without an anchor on the scoreboard: {missing}"
    broken, seen = [], 0
    for page in pages:
        text = (html_dir / page).read_text(encoding="utf-8")
        for href in re.findall(r'href="([^"]*#claim-[^"]+)"', text):
            seen += 1
            path, _, frag = href.partition("#")
            target = (Path(page).parent / path).as_posix() if path else page
            target = str(Path(target)).replace("\\", "/")
            target = "/".join(part for part in _normalise(target))
            if not (html_dir / target).is_file() or frag not in ids(target):
                broken.append(f"{page} → {href}")
    assert seen >= len(claims), f"only {seen} links to claim anchors in the whole book"
    assert not broken, f"claim links that do not resolve: {broken[:10]}"


def _normalise(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("/"):
        if part == "..":
            out.pop()
        elif part not in ("", "."):
            out.append(part)
    return out


def test_scoreboard_badges_render(open_page, pages: list[str]):
    opened = open_page(next(p for p in pages if p.endswith("scoreboard.html")))
    opened.page.evaluate(_OPEN_FOLDS_JS)
    badges = opened.page.eval_on_selector_all(
        ".verdict-badge",
        """els => els.map((el) => { const s = getComputedStyle(el);
              return {cls: el.className, text: el.textContent.trim(), bg: s.backgroundColor,
                      radius: s.borderTopLeftRadius, visible: el.getBoundingClientRect().width > 0}; })""",
    )
    assert len(badges) >= 52, f"only {len(badges)} verdict badges on the scoreboard"
    assert all(b["text"] and b["visible"] for b in badges)
    assert all(b["radius"] != "0px" for b in badges), "the badge style (book/_static/scoreboard.css) is not loaded"
    colours = {}
    for b in badges:
        colours.setdefault(b["cls"].split()[-1], set()).add(b["bg"])
    assert all(len(c) == 1 for c in colours.values()), f"a verdict drawn in two colours: {colours}"
    shown = {cls: next(iter(c)) for cls, c in colours.items()}
    for a in shown:
        for b in shown:
            if a != b and a in VERDICT_CLASSES and b in VERDICT_CLASSES and "not-run" not in a + b:
                assert shown[a] != shown[b], f"{a} and {b} share a colour"


# ---------------------------------------------------------------- verdicts first, at a glance

_OPEN_FOLDS_JS = "() => document.querySelectorAll('details').forEach((d) => { d.open = true; })"
# Every badge that a box with clipping overflow (or the window) cuts: its rectangle leaves the box's.
_CLIPPED_BADGES_JS = """() => {
  const width = document.documentElement.clientWidth;
  return Array.from(document.querySelectorAll("article .verdict-badge")).filter((el) => {
    const r = el.getBoundingClientRect();
    if (r.width === 0) return false;
    if (r.left < -1 || r.right > width + 1) return true;
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.overflowX !== "visible" || s.overflowY !== "visible") {
        const b = p.getBoundingClientRect();
        if (r.left < b.left - 1 || r.right > b.right + 1) return true;
      }
    }
    return false;
  }).map((el) => el.textContent.trim() + " in " + (el.closest("tr, li, p, div") || el).textContent.trim().slice(0, 60));
}"""
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 400, "height": 800}
# The scoreboard fits a few screens: its groups fold, its cards fold their rules, and there is no empty
# paper column (the long table it replaced was 23,300 px at 1400 px and 66,500 px at 400 px).
SCOREBOARD_MAX_SCREENS = {1400: 4, 400: 7}
COMPACT_ROW_PX = {1400: 90, 400: 200}  # the average row of the compact table, a line or three of small type


def _scoreboard_json(html_dir: Path) -> dict:
    import json

    return json.loads((html_dir.parents[1] / "book" / "chapters" / "scoreboard.json").read_text())


def _landing(pages: list[str]) -> str:
    return next(p for p in pages if p.endswith("intro.html"))


def test_landing_first_screen_shows_every_headline_verdict(open_page, pages: list[str], html_dir: Path):
    """At 1400 x 900, without scrolling: each source's line with its counts, and a badge for every headline
    claim (held and failed alike), linked to its card on the scoreboard."""
    doc = _scoreboard_json(html_dir)
    opened = open_page(_landing(pages), DESKTOP)
    chips = opened.page.eval_on_selector_all(
        "article .verdict-chip",
        """els => els.map((el) => { const b = el.querySelector('.verdict-badge').getBoundingClientRect();
                                   const a = el.querySelector('a');
                                   return {text: el.textContent.trim(), href: a ? a.getAttribute('href') : '',
                                           top: b.top, bottom: b.bottom, width: b.width}; })""",
    )
    shown = {c["text"].split()[0]: c for c in chips}
    assert set(shown) == set(doc["headlines"]), f"headline badges on the landing page: {sorted(shown)}"
    below = [t for t, c in shown.items() if not (c["width"] > 0 and 0 <= c["top"] and c["bottom"] <= DESKTOP["height"])]
    assert not below, f"headline verdicts below the first screen at 1400 x 900: {below}"
    assert all("#claim-" in c["href"] for c in chips)
    groups = [g for g in doc["groups"] if any(c["group"] == g["prefix"] for c in doc["claims"])]
    lines = opened.page.eval_on_selector_all(
        "article a[href*='#scoreboard-']", "els => els.map((a) => a.getBoundingClientRect().bottom)")
    assert len(lines) >= len(groups) and max(lines[:len(groups)]) <= DESKTOP["height"], (
        "every source's line (its counts and takeaway) belongs on the first screen")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400px", "400px"])
def test_scoreboard_fits_a_few_screens(open_page, pages: list[str], viewport: dict):
    """Every claim in one compact table (a short row each), and the rest of the page, its cards folded
    by group, a few screens."""
    opened = open_page(next(p for p in pages if p.endswith("scoreboard.html")), viewport)
    height = opened.page.evaluate("document.documentElement.scrollHeight")
    table = opened.page.evaluate("""() => { const t = document.querySelector('article table.compact-table');
        return t ? {height: t.getBoundingClientRect().height, rows: t.querySelectorAll('tbody tr').length} : null; }""")
    assert table and table["rows"] > 0, "no compact table on the scoreboard"
    per_row = table["height"] / table["rows"]
    assert per_row <= COMPACT_ROW_PX[viewport["width"]], f"a row of the compact table is {per_row:.0f} px tall on average"
    screens = SCOREBOARD_MAX_SCREENS[viewport["width"]]
    rest = height - table["height"]
    assert rest <= screens * 900, f"the scoreboard without its table is {rest} px tall at {viewport['width']} px"
    # every claim is one click away: each card sits in a folded group and is there in the page
    doc_ids = opened.page.eval_on_selector_all(".claim-card[id], .claim-card [id^='claim-']", "els => els.map((e) => e.id)")
    assert doc_ids, "no claim cards on the scoreboard"


def test_a_link_to_a_claim_unfolds_its_card(open_page, pages: list[str], html_dir: Path):
    doc = _scoreboard_json(html_dir)
    claim = next(c for c in doc["claims"] if not c["headline"])
    opened = open_page(next(p for p in pages if p.endswith("scoreboard.html")) + "#" + claim["anchor"].lower(), DESKTOP)
    box = opened.page.evaluate(
        "(id) => { const r = document.getElementById(id).getBoundingClientRect(); return [r.top, r.height]; }",
        claim["anchor"].lower())
    assert box[1] > 0 and 0 <= box[0] < DESKTOP["height"], f"{claim['id']}'s card is folded away or off screen: {box}"


def test_no_badge_is_clipped_on_a_phone(open_page, pages: list[str]):
    """At 400 px: the landing page, the scoreboard (every fold open) and every chapter: no verdict badge is
    cut by the window or by a scrolling box."""
    wanted = [_landing(pages), next(p for p in pages if p.endswith("scoreboard.html"))]
    wanted += [p for p in pages if "/chapters/" in p]
    clipped = {}
    for path in wanted:
        opened = open_page(path, PHONE)
        opened.page.evaluate(_OPEN_FOLDS_JS)
        hits = opened.page.evaluate(_CLIPPED_BADGES_JS)
        if hits:
            clipped[path] = hits[:3]
        opened.page.close()
    assert not clipped, f"verdict badges clipped at 400 px: {clipped}"


def test_a_chapter_opens_with_its_answer_and_the_claims_it_decides(open_page, pages: list[str], html_dir: Path):
    """Under every chapter's title: its answer in a sentence or two, then each claim it decides with its
    verdict and its statement written out (not in a tooltip a phone never shows), on the first screen."""
    doc = _scoreboard_json(html_dir)
    chapters = sorted({c["chapter"] for c in doc["claims"] if c["chapter"] and not c["reason"]})
    for chapter in chapters:
        expected = {c["id"]: " ".join(c["statement"].split())[:40] for c in doc["claims"]
                    if c["chapter"] == chapter and not c["reason"]}
        for size in (DESKTOP, PHONE):
            opened = open_page(next(p for p in pages if p.endswith(chapter + ".html")), size)
            strip = opened.page.evaluate("""() => { const s = document.querySelector('article div.verdict-strip');
                if (!s) return null;
                const h1 = document.querySelector('article h1'), answer = s.querySelector('p.chapter-answer');
                return {after_title: !!h1 && h1.compareDocumentPosition(s) === Node.DOCUMENT_POSITION_FOLLOWING,
                        answer: answer ? answer.innerText.trim() : '',
                        answer_top: answer ? answer.getBoundingClientRect().top : 1e9,
                        items: Array.from(s.querySelectorAll('ul.chapter-claims li')).map((li) => ({
                            id: li.querySelector('a.verdict-strip-item').textContent.trim(), text: li.innerText}))}; }""")
            opened.page.close()
            assert strip, f"{chapter} has no opening under its title"
            assert strip["after_title"], chapter
            assert len(strip["answer"].split()) >= 12, f"{chapter} opens without its answer"
            assert strip["answer_top"] < size["height"], f"{chapter}'s answer is below the first screen"
            shown = {i["id"]: i["text"] for i in strip["items"]}
            assert set(shown) == set(expected), chapter
            for cid, start in expected.items():
                assert start in " ".join(shown[cid].split()), f"{chapter}: {cid}'s statement is not written out"


def test_a_chapter_s_tables_are_numbered_and_captioned_above(open_page, pages: list[str]):
    """The verdict table (and every table named tab-…) reads "Table 3.N" in its caption, set above it,
    and a {numref} to it would find that number."""
    chapter = "chapters/03_boolean_extrapolation"
    opened = open_page(next(p for p in pages if p.endswith(chapter + ".html")), DESKTOP)
    found = opened.page.evaluate("""() => Array.from(document.querySelectorAll('div.numbered-table')).map((d) => {
        const num = d.querySelector('.caption-number'), cap = num && num.parentElement, table = d.querySelector('table');
        return {id: d.id, caption: cap ? cap.textContent.trim() : null,
                above: !!cap && !!table && cap.getBoundingClientRect().bottom <= table.getBoundingClientRect().top + 1}; })""")
    assert any(t["id"] == "tab-ch3-verdicts" for t in found), f"no numbered verdict table: {found}"
    for t in found:
        assert t["caption"] and re.match(r"Table \d+(\.\d+)*", t["caption"]), t
        assert t["above"], f"the caption of {t['id']} is not above its table"


def test_no_number_in_a_table_breaks_across_lines(open_page, pages: list[str]):
    """Cells holding a number with its spread or interval ("100.0 ± 0.0", "+10.1 [3.4, 16.8]") stay on
    one line at a phone's width; a cell of words may still wrap."""
    chapter = "chapters/04_arithmetic"
    opened = open_page(next(p for p in pages if p.endswith(chapter + ".html")), PHONE)
    cells = opened.page.evaluate("""() => Array.from(document.querySelectorAll('table td')).map((c) => [
        c.textContent.trim(), c.classList.contains('number-cell'), getComputedStyle(c).whiteSpace])""")
    spread = [c for c in cells if re.fullmatch(r"[+−-]?\d[\d.]* ± \d[\d.]*( \[[^\]]+\])?", c[0])]
    assert spread, "no mean ± spread cell found on the page"
    assert all(marked and space == "nowrap" for _, marked, space in spread), [c for c in spread if c[2] != "nowrap"][:3]
    words = [c for c in cells if re.search(r"[a-z]{4,}", c[0])]
    assert words and not any(marked for _, marked, _ in words)


# A figure's displayed width and height, against its file's: the largest relative difference of the ratios.
_SQUASHED_JS = """
async (timeoutMs) => {
  const images = Array.from(document.querySelectorAll("article img, main img"));
  images.forEach((img) => { img.loading = "eager"; });
  await Promise.race([
    Promise.all(images.map((img) => img.complete ? null : new Promise((r) => { img.onload = r; img.onerror = r; }))),
    new Promise((r) => setTimeout(r, timeoutMs)),
  ]);
  return images
    .filter((img) => img.naturalWidth > 0 && img.naturalHeight > 0 && img.clientWidth > 0 && img.clientHeight > 0)
    .map((img) => ({
      src: (img.getAttribute("src") || "").slice(-60),
      off: Math.abs((img.clientWidth / img.clientHeight) / (img.naturalWidth / img.naturalHeight) - 1),
      shown: [img.clientWidth, img.clientHeight], file: [img.naturalWidth, img.naturalHeight],
    }));
}
"""
PHONE_390 = {"width": 390, "height": 844}
DESKTOP_1366 = {"width": 1366, "height": 900}


@pytest.mark.parametrize("viewport", [DESKTOP_1366, PHONE_390], ids=["1366px", "390px"])
def test_the_first_screens_give_the_counts_and_the_table(open_page, pages: list[str], html_dir: Path, viewport: dict):
    """Without scrolling: the landing page's count of the sources' own claims by verdict, and the
    scoreboard's table of every claim (its header and first row)."""
    doc = _scoreboard_json(html_dir)
    theirs = [c for c in doc["claims"] if not c["own"] and c["words"] == "claims"]
    opened = open_page(_landing(pages), viewport)
    line = opened.page.evaluate("""() => { const el = Array.from(document.querySelectorAll('article p, article li'))
        .find((e) => e.innerText.includes("The sources’") || e.innerText.includes("The sources'"));
        return el ? {text: el.innerText, bottom: el.getBoundingClientRect().bottom} : null; }""")
    assert line, "the landing page does not count the sources' claims"
    assert f"{len(theirs)} claims" in line["text"] and line["bottom"] <= viewport["height"], line
    opened = open_page(next(p for p in pages if p.endswith("scoreboard.html")), viewport)
    table = opened.page.evaluate("""() => { const t = document.querySelector('article table.compact-table');
        if (!t) return null; const rows = t.querySelectorAll('tbody tr');
        return {rows: rows.length, first: rows[0].getBoundingClientRect().top}; }""")
    assert table and table["rows"] == len(doc["claims"]), f"the compact table lists {table} of {len(doc['claims'])}"
    assert table["first"] < viewport["height"], f"the table starts below the first screen: {table}"


@pytest.mark.parametrize("viewport", [DESKTOP_1366, PHONE_390], ids=["1366px", "390px"])
def test_every_figure_keeps_its_aspect_ratio(open_page, pages: list[str], html_dir: Path, viewport: dict):
    """No figure is squashed: at a desktop's and a phone's width, every image's displayed aspect ratio is
    its file's within 2 % (the notebook outputs carry an inline width and height; book.css lets the
    height follow the width)."""
    seen, squashed = 0, []
    for page in pages:
        if "<img" not in (html_dir / page).read_text(encoding="utf-8"):
            continue
        for img in open_page(page, viewport).page.evaluate(_SQUASHED_JS, TIMEOUT_MS):
            seen += 1
            if img["off"] > 0.02:
                squashed.append(f"{page}: {img['src']} shown {img['shown']} from {img['file']}")
    assert seen >= 20, f"only {seen} images measured"
    assert not squashed, f"figures whose shape changed at {viewport['width']} px: {squashed[:5]}"


def test_every_local_link_resolves(html_dir: Path, pages: list[str]):
    """Every link from a page of the book to a local file finds the file, and its anchor where it names
    one (a link to a file the build does not make, such as a PDF a plain `make book` never prints, is a
    404 a reader meets)."""
    broken, seen = [], 0
    for page in pages:
        text = (html_dir / page).read_text(encoding="utf-8")
        for href in re.findall(r'<a\b[^>]*\bhref="([^"]+)"', text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", href) or href.startswith("//"):
                continue  # another site, mail, data
            path, _, frag = href.partition("#")
            target = "/".join(_normalise((Path(page).parent / path).as_posix())) if path else page
            seen += 1
            if not (html_dir / target).is_file():
                broken.append(f"{page} → {href}")
            elif frag and target.endswith(".html") and f'id="{frag}"' not in (html_dir / target).read_text(encoding="utf-8"):
                broken.append(f"{page} → {href} (no such anchor)")
    assert seen >= 100, f"only {seen} local links in the whole book"
    assert not broken, f"local links that do not resolve: {broken[:10]}"


class _ProseText:
    """The text a reader reads as prose on a page: not code, not a folded block, not a script."""

    SKIP = {"script", "style", "code", "pre", "details", "kbd", "samp"}

    def __init__(self, html: str):
        from html.parser import HTMLParser

        parts, depth = [], [0]

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                if tag in _ProseText.SKIP:
                    depth[0] += 1

            def handle_endtag(self, tag):
                if tag in _ProseText.SKIP:
                    depth[0] = max(0, depth[0] - 1)

            def handle_data(self, data):
                if not depth[0]:
                    parts.append(data)

        Parser().feed(html)
        self.text = re.sub(r"\s+", " ", " ".join(parts))


_PROSE_DEFECTS = {
    "an object's repr": re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|\bobject at 0x[0-9a-f]+"),
    "a raw backtick (Markdown shown as text)": re.compile(r"`"),
    "an issue number": re.compile(r"\b[Ii]ssue #?\d+"),
    "a path into results/": re.compile(r"\bresults/"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
}
# Pages whose subject is provenance: the landing page's build line and the Reproductions page name commits.
_PROVENANCE = ("intro.html", "reproductions.html")


def test_no_machinery_or_markup_in_the_prose(html_dir: Path, pages: list[str]):
    """What a reader meets in the prose of a chapter or the scoreboard (code, folds and the "rerun" note
    excepted): no object reprs, no Markdown backticks shown as text, no issue numbers, no paths into
    results/, no commit hashes (the landing page's build line and the Reproductions page, which are about
    provenance, may name commits)."""
    found = []
    for page in pages:
        text = _ProseText((html_dir / page).read_text(encoding="utf-8")).text
        for kind, pattern in _PROSE_DEFECTS.items():
            if kind == "a commit hash" and page.endswith(_PROVENANCE):
                continue
            for m in pattern.finditer(text):
                found.append(f"{page}: {kind}: …{text[max(0, m.start() - 50):m.end() + 30]}…")
    assert not found, "\n".join(found[:12])
