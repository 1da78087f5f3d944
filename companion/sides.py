"""Which side of the run/book line each top-level module of the package is on (`companion.runs`).

RUN_SIDE modules are what a run executes: their bytes make up every run's code version, so editing
one re-keys the run store. BOOK_SIDE modules analyse, draw or publish results; a run never imports
them (tests/test_runs.py checks this), so editing or adding one leaves stored runs valid. Every
module must be on exactly one side (tested).

This file is not hashed itself: what it decides reaches a run's identity through the set of files
hashed, so adding a book-side module re-keys nothing, and adding a run-side one re-keys everything.
"""

RUN_SIDE = frozenset({"__init__", "attention", "boolean_fourier", "config", "drift", "executors", "goat", "init",
                      "masks", "model", "paths", "positions", "priors", "runs", "stats", "sweep", "train"})
BOOK_SIDE = frozenset({"chapters", "claims", "scoreboard", "plots", "gotu_report", "referee_report", "arithmetic_report",
                       "goat_report", "transport", "extrapolation_report", "cost_report", "cost",
                       "foundations", "mechanism",
                       "cli", "__main__"})
