"""The README's cost table is the measured cost of `.ci/run`, step by step: it lists exactly the steps
`make test` runs (the Makefile's TEST_STEPS, in order, each timed by tools/steps.py), each with its
minutes, and a total that is their sum with the system packages, within the 90 minutes CI allows, with
the headroom it states."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 90.0


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## What it costs on two CPU cores")
    return text[start:text.index("\n## ", start + 3)]


def _rows(section: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")]


def _test_steps() -> list[str]:
    m = re.search(r"^TEST_STEPS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), flags=re.M)
    assert m, "the Makefile names no TEST_STEPS"
    return m.group(1).split()


def _minutes(cell: str) -> float:
    m = re.match(r"\**([0-9]+(?:\.[0-9]+)?)\**", cell)
    assert m, f"no minutes in {cell!r}"
    return float(m.group(1))


def cost_table(section: str) -> tuple[float, float, float, dict[str, float]]:
    """(total, stated headroom, system packages, {step: minutes}) of the `.ci/run` rows."""
    rows = _rows(section)
    i = next(k for k, r in enumerate(rows) if r[0] == "`.ci/run`")
    total_cell = rows[i][2]
    headroom = re.search(r"([0-9]+(?:\.[0-9]+)?) of headroom", total_cell)
    assert headroom, f"the total {total_cell!r} states no headroom to the {LIMIT:.0f}-minute limit"
    steps, system = {}, None
    for r in rows[i + 1:]:
        if not r[0].startswith("·"):
            break
        name = r[0].lstrip("· ").strip()
        if name == "system packages":
            system = _minutes(r[2])
        else:
            steps[name.strip("`")] = _minutes(r[2])
    assert system is not None, "the table has no row for the system packages"
    return _minutes(total_cell), float(headroom.group(1)), system, steps


def test_the_table_lists_every_step_of_make_test_in_order():
    _, _, _, steps = cost_table(_section())
    assert list(steps) == _test_steps()


def test_the_total_is_the_sum_of_its_steps_within_the_limit_with_the_headroom_it_states():
    total, headroom, system, steps = cost_table(_section())
    assert abs(total - (system + sum(steps.values()))) <= 0.05 * (len(steps) + 1) + 0.1
    assert total <= LIMIT and abs(headroom - (LIMIT - total)) <= 0.05


def test_the_reader_fails_on_a_table_that_lost_a_step_or_a_sum():
    section = _section()
    unit = next(line for line in section.splitlines() if line.startswith("| · `unit`"))
    dropped = section.replace(unit + "\n", "")
    _, _, _, steps = cost_table(dropped)
    assert list(steps) != _test_steps()
    total, _, system, steps = cost_table(section)
    bigger = section.replace(f"**{total:g}**", f"**{total + 5:g}**", 1) if f"**{total:g}**" in section else None
    assert bigger is not None, "the total is written in bold as a plain number"
    t2, _, s2, st2 = cost_table(bigger)
    assert abs(t2 - (s2 + sum(st2.values()))) > 0.05 * (len(st2) + 1) + 0.1
