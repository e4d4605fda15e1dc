"""Budget arithmetic, pure: which notice thresholds a spend has crossed, and the words of a refusal.

A limit is a per-job cost cap (`max_cost`, set at launch) or a monthly budget (per user). Notices go out at
50, 80 and 100 % of a limit, each once; at 100 % a job is stopped (action `stop`, the default) or only
warned (`warn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

THRESHOLDS: tuple[int, ...] = (50, 80, 100)
ACTIONS: tuple[str, ...] = ("stop", "warn")


def month_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m")


def month_start(epoch: float) -> float:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


@dataclass(frozen=True)
class Spend:
    """What a limit has been charged: `finished` (attempts that ended, this month's share) plus `live` (the
    clusters running now, since the month started)."""

    finished: float
    live: float

    @property
    def total(self) -> float:
        return round(self.finished + self.live, 6)


def usd(value: float) -> str:
    """`$12.35`, `$0.2720`, `$0.000085`: a small sum keeps its significant digits."""
    if abs(value) >= 10:
        return f"${value:,.2f}"
    if abs(value) >= 0.01 or value == 0:
        return f"${value:.4f}"
    return f"${value:.6f}"


def refusal(what: str, spent: Spend, limit: float) -> str:
    """`monthly budget of 2026-11 reached: spent $12.40 (ended attempts $10.00 + running $2.40) of $12.00`"""
    return (
        f"{what} reached: spent {usd(spent.total)} (ended attempts {usd(spent.finished)} + running "
        f"{usd(spent.live)}) of {usd(limit)}; new launches are refused until it is raised or the month ends"
    )


def notice(what: str, percent: int, spent: float, limit: float, action: str) -> str:
    text = f"{what}: {percent} % reached ({usd(spent)} of {usd(limit)})"
    if percent >= 100:
        text += (
            "; stopping the job at a checkpoint" if action == "stop" else "; warning only, the job goes on"
        )
    return text


def team_notice(what: str, percent: int, spent: float, limit: float, action: str) -> str:
    """What a team's members are told (every member, whether or not a job of theirs runs)."""
    text = f"{what}: {percent} % reached ({usd(spent)} of {usd(limit)})"
    if percent >= 100:
        jobs = (
            "members' running jobs are stopped at a checkpoint" if action == "stop" else "running jobs go on"
        )
        text += f"; {jobs}, new launches are refused"
    return text
