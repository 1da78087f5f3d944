"""Which tests belong to which tier of the suite (conftest.py marks them at collection).

`heavy`: trains a model past a few steps, starts processes or daemons, or builds or executes a book:
seconds to a minute each, about 80 % of the unit tests' time. `make check` leaves them out (the inner
loop: everything else, in about a minute on two cores); `make test` runs them all.

`interpreter`: what another Python version could break when the locked libraries are the same release
on 3.11-3.13: pickling and multiprocessing start methods (pools, orphans, killed sweeps, an exception
crossing processes), dataclass and typing machinery (configs and their overrides), ctypes (the kernel),
the command line, the lock, and retrained runs against their committed records (the golden groups).
`make other-python` runs these on the second interpreter instead of the whole suite.

Entries are node-id prefixes: a module, a test, or a test with its parameters.
"""

HEAVY = (
    "tests/test_slurm_live.py",
    "tests/test_golden.py",
    "tests/test_step_memory.py",
    "tests/test_faults.py",
    "tests/test_sweep.py",
    "tests/test_ladder.py",
    "tests/test_paper_edition.py",
    "tests/test_chapter_runs.py",
    "tests/test_reproduce.py",
    "tests/test_batched.py",
    "tests/test_grids.py",
    "tests/test_cost_ftz.py",
    "tests/test_arithmetic.py::test_every_method_trains_a_few_steps",
    "tests/test_benchmark_attention.py::test_cli_",
    "tests/test_benchmark_attention.py::test_memory_probe_runs_in_a_fresh_process",
    "tests/test_benchmark_attention.py::test_run_sweep_tiny",
    "tests/test_book_pipeline.py::test_nbval_fails_when_a_checked_output_changes",
    "tests/test_book_pipeline.py::test_scoreboard_",
    "tests/test_book_pipeline.py::test_ledger_rejects_bad_entries",
    "tests/test_ch03_boolean.py",
    "tests/test_ch03_symmetry.py::test_the_recorded_measures_match_an_independent_recomputation",
    "tests/test_ch04_arithmetic.py::test_decide_decides_every_claim",
    "tests/test_claim_cli.py::test_an_unknown_id_suggests_the_near_ones",
    "tests/test_claim_cli.py::test_no_train_with_an_empty_store",
    "tests/test_figures.py::test_chapter_figures_keep_the_layout_rules_on_the_page",
    "tests/test_kernel.py::test_switched_off_it_is_not_built",
    "tests/test_kernel.py::test_the_library_is_cached_by_source_and_compiler",
    "tests/test_paper.py",
    "tests/test_runs.py::test_a_run_imports_nothing_outside_the_core",
    "tests/test_runs.py::test_hash_stable_across_processes",
    "tests/test_runs.py::test_the_id_names_the_config_and_the_numerics_version",
    "tests/test_store_trust.py::test_the_limit_counts_methods",
    "tests/test_tag_cells.py::test_the_script_checks_the_sources",
)

INTERPRETER = (
    # pickling, start methods and signals: pools, orphans, killed sweeps, a store error across processes
    "tests/test_faults.py::test_workers_and_the_resource_tracker_die_with_a_killed_sweep",
    "tests/test_faults.py::test_a_worker_whose_sweep_is_gone_starts_no_run",
    "tests/test_faults.py::test_a_run_an_orphan_finishes_is_whole",
    "tests/test_faults.py::test_one_run_id_gives_one_result_whatever_the_command_line",
    "tests/test_faults.py::test_a_write_killed_midway",
    "tests/test_batched.py::test_executors_write_one_record_per_member",
    "tests/test_sweep.py::test_ensure_many_runs_each_config_once_in_one_pool",
    "tests/test_sweep.py::test_cli_bad_input_is_one_readable_line_exit_2",
    "tests/test_sweep.py::test_parse_seeds",
    "tests/test_store_trust.py::test_store_full_crosses_processes_with_its_byte_count",
    "tests/test_runs.py",
    # dataclasses, typing and the overrides grammar
    "tests/test_config.py",
    "tests/test_properties.py",
    # ctypes: the small-map kernel against the eager path
    "tests/test_kernel.py",
    # the command line
    "tests/test_claim_cli.py",
    "tests/test_command_values.py",
    # the lock on this interpreter
    "tests/test_lockfile.py",
    # retrained runs against their committed records, every task, prior and architecture
    "tests/test_golden.py",
)


def tier_marks(nodeid: str) -> list[str]:
    """The tier markers of a test by its node id."""
    return [name for name, prefixes in (("heavy", HEAVY), ("interpreter", INTERPRETER))
            if nodeid.startswith(prefixes)]
