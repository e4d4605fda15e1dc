"""Output sent to a pipe or a file is wide: tables are not cut at rich's default 80 columns."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from cli.console import WIDE_COLUMNS, stdout_console


def test_a_table_printed_to_a_pipe_keeps_long_cells_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stdout", pipe)
    name = "a-job-name-long-enough-that-eighty-columns-would-wrap-it-" + "x" * 40
    table = Table()
    for column in ("ID", "NAME", "STATE"):
        table.add_column(column)
    table.add_row("job-0123456789ab", name, "RUNNING")

    console = stdout_console()
    console.print(table)

    assert console.width == WIDE_COLUMNS
    assert name in pipe.getvalue()
