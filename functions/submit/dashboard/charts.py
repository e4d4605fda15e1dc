"""The dashboard's pictures as geometry: a job's states and attempts over time, and spend per day by cloud.

Only numbers and labels are computed here; the templates draw them as inline SVG (attributes only, so
the page's Content-Security-Policy needs no inline styles, and every label is escaped by Jinja).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the cost report's module imports the catalog's)
    from shared.jobs.cost_report import AttemptCost

STATE_COLOURS = {
    "PENDING": "#9ca3af",
    "PLANNED": "#a78bfa",
    "PROVISIONING": "#60a5fa",
    "WAITING": "#fbbf24",
    "SETTING_UP": "#38bdf8",
    "RUNNING": "#22c55e",
    "RECOVERING": "#f97316",
    "SUCCEEDED": "#15803d",
    "FAILED": "#dc2626",
    "FAILED_SETUP": "#b91c1c",
    "FAILED_NO_RESOURCE": "#ea580c",
    "CANCELLED": "#78716c",
}
CLOUD_COLOURS = ("#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#0ea5e9", "#84cc16")
MARKET_COLOURS = {"spot": "#16a34a", "on-demand": "#2563eb"}


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    fill: str
    label: str  # drawn beside or inside the bar
    title: str  # the hover text


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    label: str


@dataclass
class Chart:
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    row_labels: list[Tick] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (colour, label)
    lines: list[tuple[float, float, float, float]] = field(default_factory=list)  # x1, y1, x2, y2
    empty: str | None = None  # said instead of a picture when there is nothing to draw


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _clock(epoch: float, span: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%H:%M:%S" if span < 6 * 3600 else "%d %b %H:%M")


def job_timeline(
    timeline: list[dict[str, Any]], attempts: tuple[AttemptCost, ...], *, now: float, live: bool
) -> Chart:
    """One band of the job's states, then one row per attempt (its cluster's life, spot or on-demand)."""
    left, right, row, gap = 150.0, 20.0, 26.0, 8.0
    width = 900
    states: list[tuple[str, float]] = []
    for event in timeline:
        at = _epoch(event["time"]) if event.get("kind") == "state" and event.get("state") else None
        if at is not None:
            states.append((event["state"], at))
    if not states:
        return Chart(width=width, height=40, empty="no timeline yet")
    start = min([t for _, t in states] + [a.started_at for a in attempts])
    ends = [t for _, t in states] + [a.ended_at or now for a in attempts]
    end = now if live else max(ends)
    span = max(end - start, 1.0)
    plot = width - left - right

    def x(t: float) -> float:
        return round(left + (t - start) / span * plot, 2)

    height = int(30 + (row + gap) * (1 + len(attempts)) + 24)
    chart = Chart(width=width, height=height)
    y = 20.0
    chart.row_labels.append(Tick(8, y + row * 0.65, "states"))
    for n, (state, at) in enumerate(states):
        until = states[n + 1][1] if n + 1 < len(states) else (now if live else end)
        w = max(x(until) - x(at), 2.0)
        title = f"{state} from {_clock(at, span)} for {until - at:.0f} s"
        chart.bars.append(Bar(x(at), y, round(w, 2), row, STATE_COLOURS.get(state, "#9ca3af"), "", title))
    for state in dict.fromkeys(s for s, _ in states):
        chart.legend.append((STATE_COLOURS.get(state, "#9ca3af"), state))
    for attempt in attempts:
        y += row + gap
        until = attempt.ended_at or now
        market = "spot" if attempt.use_spot else "on-demand"
        label = f"{attempt.place} {attempt.instance_type} ({market}) ${attempt.cost:.4f}"
        title = f"attempt {attempt.attempt}: {label}, {attempt.hours * 3600:.0f} s"
        chart.row_labels.append(Tick(8, y + row * 0.65, f"attempt {attempt.attempt}"))
        w = max(x(until) - x(attempt.started_at), 2.0)
        chart.bars.append(
            Bar(x(attempt.started_at), y, round(w, 2), row, MARKET_COLOURS[market], label, title)
        )
    for market, colour in MARKET_COLOURS.items():
        if any(("spot" if a.use_spot else "on-demand") == market for a in attempts):
            chart.legend.append((colour, f"attempt on {market}"))
    axis_y = y + row + 16
    chart.lines.append((left, axis_y - 12, width - right, axis_y - 12))
    for n in range(5):
        t = start + span * n / 4
        chart.ticks.append(Tick(x(t), axis_y, _clock(t, span)))
    return chart


def spend_by_cloud(daily: list[tuple[str, str, float]], *, days: int, now: float) -> Chart:
    """Stacked bars: one per UTC day of the window, one colour per cloud."""
    width, height, left, bottom, top = 900, 240, 60.0, 30.0, 20.0
    last = datetime.fromtimestamp(now, UTC).date()
    window = [(last - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
    per_day: dict[str, dict[str, float]] = defaultdict(dict)
    clouds: list[str] = []
    for day, cloud, cost in daily:
        per_day[day][cloud] = per_day[day].get(cloud, 0.0) + cost
        if cloud not in clouds:
            clouds.append(cloud)
    chart = Chart(width=width, height=height)
    peak = max((sum(v.values()) for v in per_day.values()), default=0.0)
    if peak <= 0:
        chart.empty = "nothing spent in this window"
        return chart
    colours = {cloud: CLOUD_COLOURS[n % len(CLOUD_COLOURS)] for n, cloud in enumerate(sorted(clouds))}
    plot_w, plot_h = width - left - 20, height - top - bottom
    slot = plot_w / len(window)
    bar_w = max(min(slot * 0.7, 60.0), 2.0)
    for n, day in enumerate(window):
        x = left + n * slot + (slot - bar_w) / 2
        base = top + plot_h
        for cloud in sorted(per_day.get(day, {})):
            cost = per_day[day][cloud]
            h = cost / peak * plot_h
            base -= h
            title = f"{day} {cloud}: ${cost:.4f}"
            chart.bars.append(
                Bar(round(x, 2), round(base, 2), round(bar_w, 2), round(h, 2), colours[cloud], "", title)
            )
        if len(window) <= 14 or n % max(1, len(window) // 10) == 0:
            chart.ticks.append(Tick(round(x + bar_w / 2, 2), height - 10, day[5:]))
    decimals = max(2, 1 - math.floor(math.log10(peak)))  # two significant digits at the top
    for fraction in (0.0, 0.5, 1.0):
        y = round(top + plot_h * (1 - fraction), 2)
        chart.lines.append((left, y, width - 20, y))
        chart.row_labels.append(Tick(4, y + 4, f"${peak * fraction:.{decimals}f}"))
    chart.legend = [(colours[c], c) for c in sorted(clouds)]
    return chart
