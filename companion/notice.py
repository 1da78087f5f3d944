"""The package's warnings: one line each, saying what happened and what to do, with no source line.

Python prints a warning as `file:line: Category: message` followed by the line of code that raised it,
which tells a reader of a chapter or a sweep nothing. Warnings of the `CompanionWarning` family print as
`Category: message` alone. That is done by wrapping `warnings.formatwarning` once, when this module is
first imported; every other warning keeps Python's format, and filters (`-W`, `simplefilter`,
`pytest.warns`) treat these warnings as they treat any other.
"""

from __future__ import annotations

import warnings

__all__ = ["CompanionWarning", "StoreWarning", "warn"]


class CompanionWarning(UserWarning):
    """A warning of this package (printed as one line)."""


class StoreWarning(CompanionWarning):
    """The run store met a file it will not use (unreadable, or not a record it could trust)."""


def warn(message: str, category: type[CompanionWarning] = CompanionWarning) -> None:
    """Issue `message` as a warning of `category` (one line when printed)."""
    warnings.warn(message, category, stacklevel=2)


def _one_line(format_warning):
    def formatwarning(message, category, filename, lineno, line=None):
        if isinstance(category, type) and issubclass(category, CompanionWarning):
            return f"{category.__name__}: {message}\n"
        return format_warning(message, category, filename, lineno, line)

    formatwarning.companion = True
    return formatwarning


if not getattr(warnings.formatwarning, "companion", False):
    warnings.formatwarning = _one_line(warnings.formatwarning)
