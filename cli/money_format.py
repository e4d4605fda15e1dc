"""Dollar amounts as the CLI prints them: cents for large sums, more digits for a short job's tiny cost."""

from __future__ import annotations


def dollars(value: float) -> str:
    """`$12.35`, `$0.2720`, `$0.000085` (a cost under a cent keeps two significant digits at least)."""
    if abs(value) >= 10:
        return f"${value:,.2f}"
    if abs(value) >= 0.01 or value == 0:
        return f"${value:,.4f}"
    return f"${value:.6f}"
