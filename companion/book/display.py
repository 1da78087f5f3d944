"""How verdicts and measures are written for readers: badges, claim anchors, units, rules in words.

Shared by the scoreboard page and each chapter's verdict table, so both say the same thing the same
way. `book/dashboard.yml` gives the unit of each measure (and the scoreboard's groups and headlines).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from companion.book.prose import DIFFERENCES, ROUNDOFF, below
from companion.book.chapter_refs import expand
from companion.book.words import verdict_words
from companion.paths import repo_root

__all__ = ["DASHBOARD", "anchor", "badge", "_balanced", "load_dashboard", "ours_text", "rule_words", "number", "measured_at",
           "with_quantity"]

DASHBOARD = Path("book") / "dashboard.yml"


def number(m) -> str:
    """A measure as a number (the ledger's own formatting: 4 significant figures, 3 when tiny or huge)."""
    if isinstance(m, bool) or m is None:
        return str(m)
    if isinstance(m, float):
        return f"{m:.3g}" if m != 0 and (abs(m) < 1e-3 or abs(m) >= 1e4) else f"{m:.4g}"
    if isinstance(m, (list, tuple)):
        return "[" + ", ".join(number(x) for x in m) + "]"
    return str(m)


def anchor(cid: str) -> str:
    """The label of a claim on the scoreboard (`{ref}` target); its HTML id is the lower-case form."""
    return f"claim-{cid}"


def badge(verdict: str) -> str:
    """A verdict as a coloured badge (inline HTML; the colours are in book/_static/scoreboard.css)."""
    slug = re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")
    return f'<span class="verdict-badge verdict-{slug}">{verdict}</span>'


def load_dashboard(path: Path | None = None) -> dict:
    """book/dashboard.yml: {sources: [{prefix, title, note, …}], headlines: [ids], units: {id: unit},
    quantities: {id: what the value is}, measured_at: {id: where, when not a run of the profile on a CPU},
    chapters: {chapter: {answer, rests_on}}}."""
    doc = expand(yaml.safe_load((path or repo_root() / DASHBOARD).read_text()) or {})  # {chapter:NN} (`chapter_refs`)
    return {"sources": doc.get("sources", []), "headlines": list(doc.get("headlines", [])),
            "units": dict(doc.get("units", {})), "quantities": dict(doc.get("quantities", {})),
            "measured_at": dict(doc.get("measured_at", {})), "chapters": dict(doc.get("chapters", {}))}


def measured_at(cid: str, profile: str, dash: dict) -> str:
    """Where a claim's value was measured, for the label of its verdict: "ci scale, CPU" for a run of the
    `ci` profile, "paper scale" for a record of the sources' settings, else the dashboard's words (a
    float64 check, a committed GPU benchmark)."""
    if cid in dash.get("measured_at", {}):
        return str(dash["measured_at"][cid])
    return f"{profile} scale, CPU" if profile == "ci" else f"{profile} scale"


def with_quantity(value: str, cid: str, dash: dict) -> str:
    """A value with what it is: "0.986 × (GOAT's perplexity at 8 × L_train over at L_train, character LM)"."""
    what = dash.get("quantities", {}).get(cid)
    return f"{value} ({what})" if what and value not in ("—", "") else value


# ---------------------------------------------------------------- words for numbers


# Units of float64 checks whose exact answer is 0: written as a bound under their floor
# (`companion.book.prose.ROUNDOFF`, `DIFFERENCES`).
_FLOORS = {"roundoff": ROUNDOFF, "differences": DIFFERENCES}


def _unit(units: dict, cid: str) -> tuple[str, str]:
    """(kind, suffix) of a claim's unit: "points", "percent: of seeds" → ("percent", "of seeds"); an
    entry may be a mapping {unit: …, ours: detail}."""
    entry = units.get(cid, "number")
    kind, _, suffix = str(entry.get("unit", "number") if isinstance(entry, dict) else entry).partition(":")
    return kind.strip(), suffix.strip()


def _in_unit(x: float, kind: str, *, signed: bool = False, exact: bool = False) -> str:
    x = 0.0 if round(100 * x, 1) == 0 and kind in ("percent", "points") else x  # never "-0.0"
    if kind == "percent":
        return (f"{100 * x:.4g} %" if exact else f"{100 * x:.1f} %").replace("-", "−")
    if kind == "points":
        value = (f"{100 * x:.4g}" if exact else f"{100 * x:.1f}").replace("-", "−")
        return f"{'+' if signed and x > 0 else ''}{value} point{'' if value.lstrip('+−') == '1' else 's'}"
    if kind == "ratio":
        return f"{x:.3g} ×"
    if kind in _FLOORS:  # a gap that rounding alone makes: a bound, the same on every processor
        return below(x, _FLOORS[kind], ".3g")
    return number(x)


def ours_text(measure, cid: str, units: dict, detail: str = "") -> str:
    """Our measure in the source's units: "75.0 %", "+66.1 points [48.2, 84.0]", "1.06 ×", "holds".

    A claim whose unit entry says `ours: detail` is decided by a statistic that combines measured values
    (a measure read at two budgets and clamped to the rule's levels): its "Ours" is the chapter's
    `detail`, which states those measured values in the source's unit, never the statistic itself."""
    if measure is None:
        return "—"
    entry = units.get(cid)
    if isinstance(entry, dict) and entry.get("ours") == "detail" and detail:
        return detail
    if isinstance(measure, bool):
        return "holds" if measure else "does not hold"
    if not isinstance(measure, (int, float)):
        return number(measure)
    kind, suffix = _unit(units, cid)
    text = _in_unit(float(measure), kind, signed=True)
    interval = re.search(r"(\d+) ?% interval \[([-−\d.]+), ([-−\d.]+)\]", detail or "")
    if interval:  # shown only when it is the interval of this very measure (it contains it)
        lo, hi = (float(interval.group(k).replace("−", "-")) for k in (2, 3))
        shown = 100 * float(measure) if kind in ("percent", "points") else float(measure)
        if lo <= shown <= hi:
            lo_text, hi_text = (interval.group(k).replace("-", "−") for k in (2, 3))
            text += f", {interval.group(1)} % interval [{lo_text}, {hi_text}]"
    return f"{text} {suffix}".strip()


def rule_words(rule: dict | None, cid: str, units: dict, words: str = "") -> str:
    """A claim's rule as a reader says it: "reproduced at ≥ 99.0 %, partly at ≥ 80.0 %", in the words of
    its kind ("borne out at …" for a hypothesis, `companion.book.words`)."""
    if not rule:
        return ""
    kind = rule["kind"]
    held, partly = verdict_words("reproduced", words), verdict_words("partly", words)
    unit, suffix = _unit(units, cid)
    u = (lambda v: f"{_in_unit(float(v), unit, exact=True)} {suffix}".strip())
    if kind == "holds":
        return f"{held} when it holds"
    if kind == "equals":
        return f"{held} when it equals {rule['value']}"
    if kind == "close":
        text = f"{held} within ±{_in_unit(float(rule['tol']), unit, exact=True)} of {u(rule['target'])}"
        if "partly_tol" in rule:
            text += f", {partly} within ±{_in_unit(float(rule['partly_tol']), unit, exact=True)}"
        return text
    sign = "≤" if kind == "at_most" else "≥"
    text = f"{held} at {sign} {u(rule['threshold'])}"
    if "partly_threshold" in rule:
        text += f", {partly} at {sign} {u(rule['partly_threshold'])}"
    return text


def _balanced(text: str) -> bool:
    """Whether every bracket opened in `text` is closed in it, in order."""
    depth = 0
    for ch in text:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _short(text: str, limit: int = 150) -> str:
    """The first clause of a long description, cut at a clause boundary outside any bracket (never
    inside a parenthesis, which would leave it open), at most `limit` characters."""
    text = " ".join(str(text).split())
    heads = []
    for sep in ("; ", ": ", ". "):
        parts = re.split(r"\. (?=[A-Z])", text) if sep == ". " else text.split(sep)  # "incl. the" ends no sentence
        for k in range(1, len(parts)):  # the first boundary of this kind that closes what it opened
            head = sep.join(parts[:k])
            if _balanced(head):
                heads.append(head)
                break
    heads = [h for h in heads if len(h) >= 30]
    text = min(heads, key=len) if heads else text
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for sep in (", ", " (", " "):
        spots = [i for i in range(len(cut) - 1, limit // 3, -1) if cut.startswith(sep, i) and _balanced(cut[:i])]
        if spots:
            return cut[:spots[0]].rstrip(",;:") + " …"
    return cut + " …"


