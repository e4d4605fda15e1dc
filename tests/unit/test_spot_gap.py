"""`benchmarks/spot_gap.py`, run as a user types it, on tiny traces whose best schedules are worked out by
hand: the best schedule it reports (cost, on-demand and spot hours, launches, unused slack) is the right
one, and the run-length oracle changes nothing where spot never ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def write_trace(folder: Path, zone: str, counts: list[int], gap: int = 600) -> Path:
    path = folder / f"{zone}_v100_1.json"
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap}, "data": counts}))
    return path


def gap_rows(*traces: Path, deadline: float) -> list[dict[str, Any]]:
    argv = [
        sys.executable,
        str(ROOT / "benchmarks" / "spot_gap.py"),
        "--json",
        "--trace",
        *map(str, traces),
        "--nodes",
        "1",
        "--work-hours",
        "3",
        "--deadline-hours",
        str(deadline),
        "--restart-hours",
        "0.2",
        "--start-hours",
        "0",
        "--on-demand-price",
        "3",
        "--spot-price",
        "1",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


def test_spot_all_the_time_is_the_best_and_the_oracle_changes_nothing(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, "us-east-1a", [1] * 60)
    (row,) = gap_rows(trace, deadline=4.0)
    assert row["best"] == {
        "cost": pytest.approx(1 / 3, abs=1e-4),
        "on_demand_hours": 0.0,
        "spot_hours": pytest.approx(3.2, abs=1e-4),
        "launches": 1,
        "unused_hours": pytest.approx(0.8, abs=1e-4),
    }
    assert row["replayed"]["cost"] == pytest.approx(1 / 3, abs=1e-4)
    assert row["runs_told"] == pytest.approx(1 / 3, abs=1e-4)
    assert row["runs_and_outages_told"] == pytest.approx(1 / 3, abs=1e-4)


def test_the_best_schedule_buys_just_enough_on_demand_to_wait_for_spot(tmp_path: Path) -> None:
    # No spot for 1.5 h (9 ticks of 10 min), then spot to the end; 3 h of work due in 4 h, restarts 0.2 h.
    # Waiting for spot leaves too little time, so the best runs on-demand for whole ticks, L >= 0.9 h:
    # 1 h (2 launches), then spot from 1.5 h: 3 + 0.2 - 0.8 = 2.4 h, done at 3.9 h; $3 + $2.4 of $9.6.
    trace = write_trace(tmp_path, "us-east-1a", [0] * 9 + [1] * 60)
    (row,) = gap_rows(trace, deadline=4.0)
    assert row["best"] == {
        "cost": pytest.approx(5.4 / 9.6, abs=1e-4),
        "on_demand_hours": pytest.approx(1.0, abs=1e-4),
        "spot_hours": pytest.approx(2.4, abs=1e-4),
        "launches": 2,
        "unused_hours": pytest.approx(0.1, abs=1e-4),
    }
    assert row["replayed"]["cost"] >= row["best"]["cost"] - 1e-9
