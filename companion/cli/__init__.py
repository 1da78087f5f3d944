"""Command line: `companion list | sweep | paper | ladder | decisive | chapters | check-sources | scoreboard | claim | reproduce`.

Each command lives in the module that owns its concept; a module joins the CLI by exposing
`add_commands(subparsers)`, which registers its subcommands with `func=` set to a callable taking
the parsed arguments and returning an exit code.

Every value is checked before any work starts (`companion.cli.values`): a bad one is one line on stderr
and exit 2, from the parser or from the command's own checks (`values.fail`), never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from companion.cli.values import Parser

_COMMAND_MODULES = ("companion.cli.runs", "companion.cli.paper", "companion.cli.ladder", "companion.cli.decisive", "companion.book.runner", "companion.book.scoreboard",
                    "companion.book.claim_cli", "companion.book.reproduce")


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
