"""The plan's words about data gravity: what reading each bucket from the chosen place costs, and why the
task stays beside its data or moves away from it ("+$184.32 egress: 2 TB from s3://data (aws us-east-1)")."""

from __future__ import annotations

from collections.abc import Sequence

from shared.optimizer.placement import Source, arrival_cost
from shared.optimizer.plan import Candidate


def size_text(gigabytes: float) -> str:
    """`2048` -> "2.05 TB"; `120` -> "120 GB"; `0.5` -> "0.5 GB" (decimal units, as the price pages bill)."""
    if gigabytes >= 1000:
        return f"{gigabytes / 1000:.3g} TB"
    return f"{gigabytes:.3g} GB"


def gravity_notes(
    chosen: Sequence[Candidate],
    alone: Sequence[Candidate],
    failovers: Sequence[Sequence[Candidate]],
    sources: Sequence[Source],
) -> list[str]:
    """Per task that reads a bucket: the egress its chosen place pays for each, then whether the task
    stays beside its data (`alone`, its cheapest place without the data, is elsewhere and moving the data
    costs more than that saves) or moves (the saving beats the transfer); `failovers`: each task's list."""
    notes: list[str] = []
    for task, pick in enumerate(chosen):
        mine = [s for s in sources if s.target == task]
        if not mine:
            continue
        label = f"task #{task + 1}: " if len(chosen) > 1 else ""
        for s in mine:
            cost = s.cost_from(pick)
            what = f"{size_text(s.gigabytes)} from {s.label or s.cloud}"
            if s.write_gigabytes:
                what += f", {size_text(s.write_gigabytes)} written back"
            if cost > 0:
                notes.append(f"{label}+${cost:,.2f} egress: {what} to {pick.cloud} {pick.region}")
            else:
                notes.append(f"{label}no egress: {what} read in place ({pick.cloud} {pick.region})")
        cheapest = alone[task]
        if (cheapest.cloud, cheapest.region) == (pick.cloud, pick.region):
            continue
        here, there = arrival_cost(task, pick, mine), arrival_cost(task, cheapest, mine)
        dearer = pick.estimated_cost - cheapest.estimated_cost
        if there > here and dearer > 0.005:
            notes.append(
                f"{label}stays in {pick.cloud} {pick.region} near its data: "
                f"{cheapest.cloud} {cheapest.region} runs it ${dearer:,.2f} cheaper "
                f"but would pay ${there:,.2f} egress (${here:,.2f} here)"
            )
    for task, pick in enumerate(chosen):
        mine = [s for s in sources if s.target == task]
        moved = [s for s in mine if s.moves_to(pick)]
        if not moved:
            continue
        label = f"task #{task + 1}: " if len(chosen) > 1 else ""
        beside = _best_beside(failovers[task], moved)
        if beside is None:
            continue
        egress = arrival_cost(task, pick, mine) - arrival_cost(task, beside, mine)
        saving = beside.estimated_cost - pick.estimated_cost
        notes.append(
            f"{label}moves to {pick.cloud} {pick.region}, away from its data: it saves ${saving:,.2f} on "
            f"compute against {beside.cloud} {beside.region}, more than the ${egress:,.2f} egress"
        )
    return notes


def _best_beside(candidates: Sequence[Candidate], sources: Sequence[Source]) -> Candidate | None:
    """The task's best candidate where none of `sources` has to move, if any."""
    return next((c for c in candidates if not any(s.moves_to(c) for s in sources)), None)
