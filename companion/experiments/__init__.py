"""Experiment presets of the chapters, one module per chapter family; each registers with
`companion.config.register_experiment` when imported (`companion.config.load_experiments` imports
every module of this package)."""
