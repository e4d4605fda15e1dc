"""A deadline job run past its `--hours` estimate, told once. Pure: no I/O.

The first decision that sees the job's work counted reach its estimate while the task still runs (the
check the control plane schedules for that moment, or a relaunch) writes one timeline event of kind
`overrun` (shared/jobs/deadline_launch.py), conditional on the job's version, with the facts in its
detail (shared/jobs/deadlines.py `overrun_facts`): the estimate, the work counted, the deadline, the cluster
kept and where the job goes after a preemption, with prices per hour. The owner is told what skyless does
now and what it will cost: the rest of the work being unknown, a running cluster is kept and a preemption
is followed by on-demand at once, to the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared.notifications.events import JobFacts, Notification, TimelineRecord

OVERRUN_TOPIC = "overrun"
SPOKEN = {"spot": "spot", "on_demand": "on-demand"}


def compose_overrun(record: TimelineRecord, facts: JobFacts) -> Notification:
    detail = record.detail
    estimate = _hours(_number(detail, "estimate"))
    return Notification(
        topic=OVERRUN_TOPIC,
        subject=f"skyless: {facts.name or facts.job_id} ran past its {estimate} estimate",
        event_message=_message(detail, facts.job_id),
        facts=facts,
        extra_lines=tuple(_lines(detail)),
    )


def _message(detail: Mapping[str, Any], job_id: str) -> str:
    worked, estimate = _hours(_number(detail, "work_counted")), _hours(_number(detail, "estimate"))
    said = (
        f"It has run {worked} of compute, past the {estimate} given with --hours, and is still running. "
        f"The rest of the work is unknown, so skyless guards the deadline ({_deadline(detail)}) as well as "
        "it can:"
    )
    running, on_demand = detail.get("running"), detail.get("on_demand")
    if isinstance(running, Mapping) and running.get("market") == "on_demand":
        now = f" it keeps the on-demand cluster on {running.get('place')} ({_price(running)}) to the end."
    elif isinstance(running, Mapping):
        now = f" it keeps the spot cluster on {running.get('place')} ({_price(running)});"
        now += (
            f" after a preemption it restarts on on-demand at once, {_on_demand(detail)}, and stays there."
            if isinstance(on_demand, Mapping)
            else " the plan has no on-demand place, so after a preemption it waits for spot."
        )
    elif isinstance(on_demand, Mapping):
        now = f" it restarts now on on-demand, {_on_demand(detail)}, and stays there to the end."
    else:
        now = " the plan has no on-demand place, so it waits for spot."
    act = (
        f" If the work needs more time than the deadline leaves, `skyless cancel {job_id}` and launch it "
        "again with a later --deadline."
    )
    return said + now + act


def _lines(detail: Mapping[str, Any]) -> list[tuple[str, str]]:
    running, on_demand = detail.get("running"), detail.get("on_demand")
    lines = [
        ("Estimate", _hours(_number(detail, "estimate"))),
        ("Work counted", _hours(_number(detail, "work_counted"))),
        ("Deadline", _deadline(detail)),
    ]
    after = f"on-demand {_on_demand(detail)}" if isinstance(on_demand, Mapping) else None
    if isinstance(running, Mapping) and running.get("market") == "on_demand":
        lines.append(("Now", f"on-demand kept to the end ({_price(running)})"))
    elif isinstance(running, Mapping):
        lines.append(("Now", f"spot kept ({_price(running)})"))
        lines.append(("After a preemption", after or "waits for spot (the plan has no on-demand place)"))
    else:
        lines.append(("Now", f"restarting on {after}" if after else "waiting for spot (no on-demand place)"))
    return lines


def _on_demand(detail: Mapping[str, Any]) -> str:
    """Where on-demand runs and its price, against the spot price it replaces."""
    on_demand = detail["on_demand"]
    told = f"on {on_demand.get('place')} at {_price(on_demand)}"
    price, spot = on_demand.get("hourly_price"), detail.get("spot_hourly_price")
    if price is not None and spot:
        told += f", {float(price) / float(spot):.1f}x the spot price (${float(spot):.4f}/h)"
    return told


def _price(where: Mapping[str, Any]) -> str:
    price = where.get("hourly_price")
    return "price unknown" if price is None else f"${float(price):.4f}/h"


def _deadline(detail: Mapping[str, Any]) -> str:
    at = detail.get("deadline_at")
    if at is None:
        return "unknown"
    when = datetime.fromtimestamp(float(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    left = float(at) - float(detail.get("at") or at)
    return f"{when}, {_hours(left)} away" if left > 0 else f"{when}, passed"


def _number(detail: Mapping[str, Any], key: str) -> float | None:
    value = detail.get(key)
    return None if value is None else float(value)


def _hours(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds / 3600:.4g} h"
