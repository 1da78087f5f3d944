"""Command line: `companion list | sweep | paper | ladder | chapters | check-sources | scoreboard | claim | reproduce`.

Each command lives in the module that owns its concept; a module joins the CLI by exposing
`add_commands(subparsers)`, which registers its subcommands with `func=` set to a callable taking
the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

_COMMAND_MODULES = ("companion.cli.runs", "companion.cli.paper", "companion.cli.ladder", "companion.book.runner", "companion.book.scoreboard",
                    "companion.book.claim_cli", "companion.book.reproduce")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="companion",
        description="Run the chapters, sweeps and checks of 'Attention Priors, Reproduced'.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
