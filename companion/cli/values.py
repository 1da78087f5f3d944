"""What every command checks before it does any work: the values of its options, one line each.

A bad value is refused by the parser itself (exit 2, before the command runs a line of its own): each
option that takes a number, a seed list, a device or a folder names one of the checkers below as its
`type`, and `Parser.error` prints one line, `companion COMMAND: error: argument --jobs: must be a whole
number >= 1, got '0' (…)`, instead of argparse's usage block. What can only be checked against the
experiments (a method, a `--set` override, a task's parameters, the device of a config) is checked by the
command right after parsing, still before any run starts (`companion.preflight`), and refused the same
way, one line and exit 2 (`fail`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from companion.preflight import check_device

__all__ = ["Parser", "positive_int", "nonnegative_int", "positive_minutes", "seeds",
           "device", "folder", "existing_file", "fail"]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `companion sweep: error: argument --jobs: …` and exit 2."""

    def error(self, message: str):  # noqa: D401  (argparse's hook)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _whole(text: str) -> int:
    try:
        return int(text.strip())
    except (ValueError, AttributeError):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number >= 1 (workers, minutes of a Slurm limit, CPUs)."""
    n = _whole(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return n


def nonnegative_int(text: str) -> int:
    """A whole number >= 0 (GPUs a node, a seed)."""
    n = _whole(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return n


def positive_minutes(text: str) -> float:
    """A finite number of minutes > 0."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, got {text!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of minutes > 0, got {text!r}")
    return x


def seeds(text: str) -> str:
    """A seed list as `companion.sweep.parse_seeds` reads it ("0-4", "0,2,5", "0-2,7"); kept as text."""
    from companion.sweep import parse_seeds  # the one reader of seed lists
    try:
        parse_seeds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).rstrip(".")) from None
    return text


def device(text: str) -> str:
    """A device this machine has, or `auto` (CUDA where present, else the CPU)."""
    if text == "auto":
        return text
    try:
        return check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def folder(text: str) -> str:
    """A folder to read or write records in: it may not exist yet, but it may not be a file."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; name a folder")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    return text


def existing_file(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return path


def fail(command: str, message: str, code: int = 2) -> int:
    """Print `companion COMMAND: error: MESSAGE` on one line; return `code`."""
    print(f"companion {command}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code
