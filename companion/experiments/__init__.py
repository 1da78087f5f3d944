"""Experiment presets of the chapters, one module per chapter family; each registers with
`companion.config.register_experiment` when imported (see `EXPERIMENT_MODULES`)."""
