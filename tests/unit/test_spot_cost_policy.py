"""The expected-cost experiment (`benchmarks/spot_cost_policy.py`): run as a user types it through
`benchmarks/spot_gap.py --policy expected-cost` on traces whose answer is known, and replayed over random
availability with tight deadlines and long restarts, where it must never finish late."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.spot_policy import AvailabilityTrace, PlaceOption, replay

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from spot_cost_policy import decide_cost  # noqa: E402

HOUR = 3600.0


def gap_row(tmp_path: Path, counts: list[int], deadline: float) -> dict[str, Any]:
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": counts}))
    argv = [sys.executable, str(ROOT / "benchmarks" / "spot_gap.py"), "--json", "--policy", "expected-cost",
            "--trace", str(trace), "--nodes", "1", "--work-hours", "3", "--deadline-hours", str(deadline),
            "--restart-hours", "0.2", "--start-hours", "0",
            "--on-demand-price", "3", "--spot-price", "1"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.strip().splitlines()
    return json.loads(line)


def test_spot_all_the_time_is_taken_once_and_kept(tmp_path: Path) -> None:
    row = gap_row(tmp_path, [1] * 60, deadline=4.0)
    assert row["policy"] == "expected-cost" and row["replayed"]["cost"] == pytest.approx(1 / 3, abs=1e-4)
    assert row["replayed"]["launches"] == 1
    assert row["replayed"]["on_demand_hours"] == 0.0


def test_no_spot_ever_runs_on_demand_in_time(tmp_path: Path) -> None:
    row = gap_row(tmp_path, [0] * 60, deadline=4.0)
    assert row["replayed"]["spot_hours"] == 0.0
    assert row["replayed"]["unused_hours"] >= 0.0
    assert row["replayed"]["cost"] <= 1.0 + 1e-4  # at most what all on-demand costs (one launch)


def _alternating(rng: random.Random, ticks: int, mean_up: int, mean_down: int) -> tuple[bool, ...]:
    out: list[bool] = []
    up = rng.random() < 0.5
    while len(out) < ticks:
        out += [up] * max(1, round(rng.expovariate(1 / (mean_up if up else mean_down))))
        up = not up
    return tuple(out[:ticks])


@pytest.mark.parametrize("seed", range(12))
def test_never_late_on_random_availability(seed: int) -> None:
    rng = random.Random(seed)
    gap = 300.0
    zones = [("us-east-1a", "us-east-1"), ("us-east-1b", "us-east-1"), ("us-west-2a", "us-west-2")][
        : rng.choice([1, 3])
    ]
    places = [PlaceOption(z, 1.0, 3.1, r) for z, r in zones]
    traces = [
        AvailabilityTrace(z, gap, _alternating(rng, 400, rng.choice([3, 12, 48]), rng.choice([2, 12, 36])))
        for z, _ in zones
    ]
    work, restart = rng.choice([4, 8]) * HOUR, rng.choice([0.1, 0.5]) * HOUR
    # The slack beyond one launch is a tenth to two thirds of the work: tight, and on-demand can keep it.
    result = replay(decide_cost, traces, places, start_tick=0, total_work=work,
                    deadline_after=restart + work / rng.choice([0.6, 0.8, 0.9]),
                    restart_overhead=restart)  # fmt: skip
    assert not result.missed, (result.finished_at, result.deadline)
