"""The book side of the package: everything that reads runs and never trains.

Shared concepts, one module each: `frames` (records → frames, curves, trained models), `stats`
(means, intervals, paired differences over seeds), `labels` (the one table of names and colours),
`plots` (the one figure style), `transport` (attention as transport with a prior: the optimiser of
Part IV and the views of a GOAT prior; what is measured on a model is `companion.transport`), `claims` and `scoreboard` (the ledger and its verdicts), `runner` (executes the chapters),
`parameters` (checks a chapter's papermill parameters).
Then one module per chapter, `chNN_*.py`: functions from run records to that chapter's claim
measures, tables and figure data. Chapter modules import the shared modules, never each other.

Nothing in the core imports this folder, and it is never hashed into a run's identity.
"""
