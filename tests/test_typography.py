"""The book's percent rule: a thin no-break space between a number and its percent sign, in the page's
text and in the HTML tables of notebook outputs, never in code, literals or math."""

from __future__ import annotations

from docutils import nodes

from companion.book.site import typography as ty

THIN = "\u202f"


def test_every_way_of_writing_a_percentage_gets_one_thin_space():
    assert ty.thin_percent("87.3 %") == f"87.3{THIN}%"
    assert ty.thin_percent("87.3%") == f"87.3{THIN}%"
    assert ty.thin_percent("87.3\u00a0%, 95 % interval") == f"87.3{THIN}%, 95{THIN}% interval"
    assert ty.thin_percent(f"87.3{THIN}%") == f"87.3{THIN}%"  # idempotent


def test_a_percent_sign_that_follows_no_number_is_left_alone():
    for text in ("accuracy (%)", "in %, mean", "%d", "a % b", "x %"):
        assert ty.thin_percent(text) == text


def test_html_text_changes_and_markup_does_not():
    html = '<td style="width:100%">18.6 %</td><pre>f"{x} %" 3 %</pre><td>95 % [1, 2]</td>'
    assert ty.thin_percent_html(html) == (f'<td style="width:100%">18.6{THIN}%</td><pre>f"{{x}} %" 3 %</pre>'
                                          f"<td>95{THIN}% [1, 2]</td>")


def test_a_doctree_changes_in_text_and_raw_html_but_not_in_code_or_math():
    para = nodes.paragraph("", "", nodes.Text("reaches 75 % here "), nodes.literal("", "f'{a} %'"),
                           nodes.math("", r"50 \%"), nodes.inline("", "", nodes.Text("61.1 %")))
    raw = nodes.raw("", "<table><td>18.6 %</td></table>", format="html")
    code = nodes.literal_block("", "print(f'{x} %')  # 3 %")
    doc = nodes.section("", para, raw, code)
    assert ty.apply(doc) == 3
    assert para[0].astext() == f"reaches 75{THIN}% here "
    assert para[1].astext() == "f'{a} %'" and para[2].astext() == r"50 \%"
    assert para[3].astext() == f"61.1{THIN}%"
    assert raw.astext() == f"<table><td>18.6{THIN}%</td></table>"
    assert code.astext() == "print(f'{x} %')  # 3 %"
    assert ty.apply(doc) == 0  # applied once, nothing is left to change
