"""The CLI's consoles: one place decides how wide output is.

A terminal gets its own width; a pipe or a file (`skyless queue | cat`, `| tee`) gets WIDE_COLUMNS,
so tables are not cut to rich's default of 80 columns.
"""

from __future__ import annotations

import sys

from rich.console import Console

WIDE_COLUMNS = 200


def stdout_console() -> Console:
    """Stdout as it is now (a test runner may have replaced it)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else WIDE_COLUMNS)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else WIDE_COLUMNS)
