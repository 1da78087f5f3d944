"""Command line: `companion list | sweep | paper | ladder | decisive | chapters | check-sources | scoreboard | claim | reproduce`.

Each command lives in the module that owns its concept; a module joins the CLI by exposing
`add_commands(subparsers)`, which registers its subcommands with `func=` set to a callable taking
the parsed arguments and returning an exit code.

Every value is checked before any work starts (`companion.cli.values`): a bad one is one line on stderr
and exit 2, from the parser or from the command's own checks (`values.fail`), never a traceback. Installed
without the `train` extra (`pip install attention-priors`, the core alone), it says in one line which packages
it lacks and how to add them, and exits 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from companion.cli.values import Parser

_COMMAND_MODULES = ("companion.cli.runs", "companion.cli.paper", "companion.cli.ladder", "companion.cli.decisive", "companion.book.runner", "companion.book.scoreboard",
                    "companion.book.claim_cli", "companion.book.reproduce")

# The `train` extra of pyproject.toml, by the name each is imported as (tests/test_cli_extras.py holds the two
# equal): the engine behind every command. The core, `pip install attention-priors`, brings none of them.
TRAIN_MODULES = {"torchvision": "torchvision", "scipy": "scipy", "pandas": "pandas", "yaml": "PyYAML",
                 "tqdm": "tqdm", "submitit": "submitit", "sklearn": "scikit-learn"}


def missing_train_extra() -> str | None:
    """One line naming the `train` extra's packages that are not installed and the fix; None if all are."""
    missing = [dist for module, dist in TRAIN_MODULES.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"companion: error: the command line needs the engine's packages, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: pip install 'attention-priors[train]'")


def build_parser() -> Parser:
    parser = Parser(
        prog="companion",
        description="Run the chapters, sweeps and checks of 'Attention Priors, Reproduced'.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    missing = missing_train_extra()
    if missing:
        print(missing, file=sys.stderr)
        return 1
    env = os.environ.get("COMPANION_ROOT")
    if env is not None and not (Path(env).expanduser() / "_toc.yml").is_file():
        print(f"companion: error: COMPANION_ROOT={env!r} is not a checkout of the book (no _toc.yml there); "
              "point it at the repository root, or unset it", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, or a value the parser refused (one line already printed): a code
        return stop.code if isinstance(stop.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # every command: one line and the shell's code for Ctrl-C, no traceback
        print(f"\ncompanion {args.command}: interrupted; what had finished is stored, and the same command "
              "continues from there.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
