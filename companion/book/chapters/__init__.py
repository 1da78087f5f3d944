"""The book's chapter analyses: one module per chapter (`chNN_*`, each `load` → `decide` → tables and
figure data, `companion.book.chapter`), the sections with claims of their own (symmetry, step_cap,
subnormals), what several chapters share (frames, stats, interpolator, entropic, ladder), the figure
system (plots) and figures/ (one module per chapter). They read records and never train. The book's
machinery, one folder up, runs them and never imports them by name: the runner, the claim command
and the paper-status tables find a chapter's module through `companion.book.chapter.module_of`."""
