"""The chapters' figures, one module per chapter: each function takes what the chapter's notebook has
computed (tables, curves, maps) and returns a figure laid out for the book's column by
`companion.book.chapters.plots` (text ≥ 9 pt on the page, legends outside the data, a colour bar on every heat
map, labelled log ticks), so that the rules are tested on the figures themselves (tests/test_figures.py)
and a notebook cell that draws is one call.
"""
