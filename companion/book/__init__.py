"""The book side of the package: everything that reads runs and never trains. Three parts, imported one way:

- this folder, the book's core and its commands: the claims ledger and its verdicts (`claims`, `words`,
  `preconditions`, `display`), the shape every chapter shares and a claim's declaration (`chapter`), prose
  numbers and names (`prose`, `labels`, `colours`), a notebook's parameters (`parameters`), what is stored at
  the paper profile (`paper_status`, `predictions`), and the commands that execute, score and retrain
  (`runner`, `scoreboard`, `claim_cli`, `reproduce`). It imports the engine, never `site`, and reaches a
  chapter only through `chapter.module_of`;
- `chapters/`, the analyses: one module per chapter and the sections with claims of their own. They import
  the core, never `site` and never each other's command machinery;
- `site/`, page building: the Sphinx extension, typography, the glance and verdict strips, the scoreboard
  page, tables, the paper edition and the PDF. It may import the core; nothing in the core or the chapters
  imports it but the commands that write pages (`runner`, `scoreboard`).

Nothing in the engine imports this folder, and it is never hashed into a run's identity.
"""
