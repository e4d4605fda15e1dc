"""Not built yet."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
