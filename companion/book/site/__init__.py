"""Page building: what turns executed chapters and the ledger into the book's pages. `sphinxext` (the Sphinx
extension: build facts, the landing page's counts, the API check), `typography`, `glance` and `verdict_strip`
(the strips above a page), `compact` (a verdict's short form), `scoreboard_page`, `tables` and `cells` (how a
table and a notebook cell are shown), `edition` (the paper-profile edition) and `pdf`. It may import the
book's core (`companion.book`) and the engine's paths; the chapters never import it."""
