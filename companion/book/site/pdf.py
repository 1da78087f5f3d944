"""The whole book as one PDF: the single-page build, every fold opened, printed by headless Chromium.

`make pdf` (`python -m companion.book.site.pdf`) runs `jupyter-book build . --builder singlehtml`, opens
every folded group and card of the scoreboard in a copy of that page (a closed `<details>` prints
nothing), prints it with headless Chromium (with a document outline: one bookmark per heading), and
puts the file where the HTML book serves it, `_build/html/attention-priors-reproduced.pdf`, which
the landing page links. Then it checks the file: a PDF that ends where it says it ends, pages, and a
bookmark for every chapter's title (the first `# ` heading of each chapter in `_toc.yml`); it fails
naming what is missing. No PDF library is needed: Chromium writes the outline's titles as PDF
strings, read here directly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from companion.paths import repo_root

__all__ = ["PDF_NAME", "chapter_titles", "printable", "print_pdf", "outline_titles", "page_count", "check", "main"]

PDF_NAME = "attention-priors-reproduced.pdf"
SINGLE = Path("_build") / "singlehtml"
HTML = Path("_build") / "html"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-pdf-header-footer",
                  "--generate-pdf-document-outline", "--run-all-compositor-stages-before-draw",
                  "--virtual-time-budget=60000"]  # MathJax typesets before the page is printed
_FOLD = re.compile(r'<details(?![^>]*\bopen\b)(?=[^>]*\bclass="[^"]*\bsd-dropdown\b)')
_TITLE = re.compile(rb"/Title\s*(\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>)")
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def chapter_titles(root: Path) -> list[str]:
    """The title (first `# ` heading) of every chapter the table of contents lists under book/chapters/."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])
             if c["file"].startswith("book/chapters/")]
    titles = []
    for f in files:
        cells = json.loads((root / f"{f}.ipynb").read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        m = re.search(r"^# (.+)$", text, re.M)
        if m:
            titles.append(m.group(1).strip())
    return titles


def printable(page: Path, site: Path) -> Path:
    """A copy of the single page at the root of its `site` (where its links to _static/ and _images/
    point, wherever the page itself was written), with every scoreboard fold (sphinx-design dropdown) open."""
    out = site / "print.html"
    out.write_text(_FOLD.sub("<details open", page.read_text(encoding="utf-8")), encoding="utf-8")
    return out


def find_chromium() -> str | None:
    return shutil.which(os.environ.get("COMPANION_CHROMIUM", "chromium")) or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def print_pdf(page: Path, out: Path, chromium: str, timeout: float = 300) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    subprocess.run([chromium, *CHROMIUM_FLAGS, f"--print-to-pdf={out}", page.resolve().as_uri()],
                   check=True, timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _pdf_string(token: bytes) -> str:
    if token.startswith(b"<"):
        raw = bytes.fromhex(re.sub(rb"\s", b"", token[1:-1]).decode())
    else:
        raw = re.sub(rb"\\([nrtbf()\\])", lambda m: _ESCAPES.get(m.group(1), m.group(1)), token[1:-1])
    return raw[2:].decode("utf-16-be") if raw[:2] == b"\xfe\xff" else raw.decode("latin-1")


def outline_titles(data: bytes) -> list[str]:
    """The titles of the document information and outline entries, as text."""
    return [_pdf_string(t) for t in _TITLE.findall(data)]


def page_count(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page\b(?!s)", data))


def _norm(title: str) -> str:
    """A heading without its spaces, typographic quote or case: Chromium writes an outline entry from the
    heading's laid-out lines, joined without a space ("5. The mask on images and onlanguage")."""
    return "".join(title.replace("’", "'").split()).lower()


def check(pdf: Path, titles: list[str]) -> int:
    """The PDF's page count; raises ValueError naming what is wrong (not a PDF, no pages, a chapter
    without its bookmark)."""
    data = pdf.read_bytes()
    if not data.startswith(b"%PDF-") or b"%%EOF" not in data[-1024:] or b"trailer" not in data and b"/XRef" not in data:
        raise ValueError(f"{pdf} is not a complete PDF (no header, trailer or end-of-file marker).")
    pages = page_count(data)
    if pages < max(1, len(titles)):
        raise ValueError(f"{pdf} has {pages} pages for {len(titles)} chapters.")
    found = [_norm(t) for t in outline_titles(data)]
    missing = [t for t in titles if not any(_norm(t) in f for f in found)]
    if missing:
        raise ValueError(f"{pdf} has no bookmark for the chapters {missing}; its outline holds {len(found)} titles "
                         "(Chromium writes one with --generate-pdf-document-outline).")
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m companion.book.site.pdf", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help=f"the PDF (default: {HTML / PDF_NAME})")
    parser.add_argument("--no-build", action="store_true", help="print the single page already in _build/singlehtml")
    parser.add_argument("--skip-without-chromium", action="store_true",
                        help="without Chromium, say so in one line and succeed (`make test`)")
    args = parser.parse_args(argv)
    root = repo_root()
    out = args.out or root / HTML / PDF_NAME
    chromium = find_chromium()
    if chromium is None:
        print("pdf: Chromium not found; install Debian's chromium (apt-get install chromium) or set COMPANION_CHROMIUM"
              + ("; skipped" if args.skip_without_chromium else ""), file=sys.stderr)
        return 0 if args.skip_without_chromium else 1
    start = time.perf_counter()
    if not args.no_build:
        subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--builder", "singlehtml"],
                       check=True, cwd=root, stdout=subprocess.DEVNULL)
    built = time.perf_counter()
    page = root / SINGLE / f"{yaml.safe_load((root / '_toc.yml').read_text())['root']}.html"
    print_pdf(printable(page, root / SINGLE), out, chromium)
    try:
        pages = check(out, chapter_titles(root))
    except ValueError as err:
        print(f"pdf: {err}", file=sys.stderr)
        return 1
    done = time.perf_counter()
    print(f"pdf: {out.relative_to(root) if out.is_relative_to(root) else out}: {pages} pages, every chapter's title "
          f"in its outline; single page built in {built - start:.0f} s, printed and checked in {done - built:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
