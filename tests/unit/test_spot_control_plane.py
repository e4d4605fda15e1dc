"""`benchmarks/spot_policy.py --control-plane`, run as a user types it, on tiny traces whose right answers
are known: what it charges is what the clusters ran, a restart paid each time the task starts again."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OD, SPOT = 3.0, 1.0
WORK, RESTART = 3.0, 0.2


def write_trace(folder: Path, zone: str, counts: list[int], gap: int = 600) -> Path:
    path = folder / f"{zone}_v100_1.json"
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap}, "data": counts}))
    return path


def control_plane(
    *traces: Path,
    deadline: str,
    nodes: int = 1,
    policy: str = "skyless",
    env: dict[str, str] | None = None,
    start: float = 0.0,
) -> dict[str, Any]:
    argv = [
        sys.executable,
        str(ROOT / "benchmarks" / "spot_policy.py"),
        "--control-plane",
        "--json",
        "--trace",
        *map(str, traces),
        "--nodes",
        str(nodes),
        "--work-hours",
        str(WORK),
        "--deadline-hours",
        deadline,
        "--restart-hours",
        str(RESTART),
        "--start-hours",
        str(start),
        "--on-demand-price",
        str(OD),
        "--spot-price",
        str(SPOT),
        "--policy",
        policy,
    ]
    environ = {**os.environ, **(env or {})}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=environ)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    row: dict[str, Any] = json.loads(lines[0])
    return row


def relative(hours_on_spot: float, hours_on_demand: float = 0.0) -> float:
    return (SPOT * hours_on_spot + OD * hours_on_demand) / (OD * (WORK + RESTART))


@pytest.mark.parametrize("deadline", ["none", "4"])
def test_spot_all_the_time_costs_spot_price_for_the_work_and_one_restart(
    tmp_path: Path, deadline: str
) -> None:
    row = control_plane(write_trace(tmp_path, "us-east-1a", [1] * 200), deadline=deadline)
    assert row["cost"] == pytest.approx(relative(WORK + RESTART), abs=1e-3)
    assert row["finished_hours"] == pytest.approx(WORK + RESTART, abs=0.01)
    assert (row["launches"], row["refused"], row["preemptions"], row["missed"]) == (1, 0, 0, False)


def test_a_preemption_is_charged_another_restart(tmp_path: Path) -> None:
    """Spot for 2 h, none for 20 min, then back: the first cluster ran 2 h (1.8 h of work), the second
    the rest of the work after its own restart."""
    trace = write_trace(tmp_path, "us-east-1a", [1] * 12 + [0] * 2 + [1] * 200)
    row = control_plane(trace, deadline="none")
    assert row["cost"] == pytest.approx(relative(WORK + 2 * RESTART), abs=1e-3)
    assert (row["launches"], row["preemptions"], row["missed"]) == (2, 1, False)
    assert row["refused"] >= 1  # spot was tried while the zone had none


def test_a_start_between_trace_samples_runs_the_window_the_replay_is_judged_on(tmp_path: Path) -> None:
    """Spot for the first 20 samples of 10 min (3.33 h), enough for the 3.2 h the job needs from the first
    sample. Started 9 min into it, the control plane ran another window than the replay and the best
    possible (which start on samples): 3.18 h of spot, a preemption just short of the end, a restart more."""
    trace = write_trace(tmp_path, "us-east-1a", [1] * 20 + [0] * 200)
    row = control_plane(trace, deadline="none", start=0.15)
    assert row["cost"] == pytest.approx(relative(WORK + RESTART), abs=1e-3)
    assert (row["launches"], row["preemptions"]) == (1, 0)


def test_a_deadline_spot_cannot_meet_goes_on_demand_and_is_met(tmp_path: Path) -> None:
    row = control_plane(write_trace(tmp_path, "us-east-1a", [0] * 200), deadline="3.5")
    assert row["missed"] is False
    assert row["finished_hours"] is not None and float(row["finished_hours"]) <= 3.5
    assert row["cost"] == pytest.approx(relative(0, WORK + RESTART), abs=1e-3)
    assert row["launches"] == 1 and row["preemptions"] == 0


def test_all_or_nothing_spot_for_a_multi_node_job(tmp_path: Path) -> None:
    """A zone with 3 of the 4 nodes the job needs has no spot for it: the job runs on-demand."""
    row = control_plane(write_trace(tmp_path, "us-east-1a", [3] * 100 + [4] * 100), deadline="3.5", nodes=4)
    assert row["missed"] is False and row["preemptions"] == 0
    assert row["cost"] == pytest.approx(relative(0, WORK + RESTART), abs=1e-3)


def test_the_benchmark_honours_the_products_limit_of_refused_spot_launches(tmp_path: Path) -> None:
    """SKYLESS_SPOT_REFUSALS_PER_HOUR bounds a job's refused spot launches in the benchmark as in a
    deployment: with no spot in 3 zones for hours, 2 per hour against no limit."""
    traces = [write_trace(tmp_path, zone, [0] * 200) for zone in ("us-east-1a", "us-east-1b", "us-west-2a")]
    limited = control_plane(*traces, deadline="8", env={"SKYLESS_SPOT_REFUSALS_PER_HOUR": "2"})
    unlimited = control_plane(*traces, deadline="8", env={"SKYLESS_SPOT_REFUSALS_PER_HOUR": "0"})
    assert not limited["missed"] and not unlimited["missed"]
    assert 0 < limited["refused"] <= 2 * math.ceil(limited["finished_hours"])
    assert unlimited["refused"] > limited["refused"]


def test_a_spot_job_outlives_an_hour_without_spot_in_its_only_zone(tmp_path: Path) -> None:
    """Recovery waits for spot as long as it takes (SkyPilot's managed jobs retry forever); a first launch
    still gives up after SKYLESS_MAX_WAIT_RETRIES rounds."""
    trace = write_trace(tmp_path, "us-east-1a", [1] * 12 + [0] * 6 + [1] * 200)
    row = control_plane(trace, deadline="none")
    assert row["missed"] is False
    assert row["cost"] == pytest.approx(relative(WORK + 2 * RESTART), abs=1e-3)
    assert row["finished_hours"] >= 3 + WORK - 1.8 + RESTART - 0.01  # restarted once spot came back at 3 h


def test_eager_next_region_recovers_in_another_region_and_skyless_costs_no_more(tmp_path: Path) -> None:
    """SkyPilot's EAGER_NEXT_REGION, answering on the control plane's path: preempted in us-east-1 after
    2 h, it relaunches at once in us-west-2 (the preempted region is blocked for that recovery), before
    trying us-east-1 again. skyless's own no-deadline recovery on the same traces costs no more."""
    east = write_trace(tmp_path, "us-east-1a", [1] * 12 + [0] * 2 + [1] * 200)
    west = write_trace(tmp_path, "us-west-2a", [1] * 214)
    eager = control_plane(east, west, deadline="none", policy="eager-next-region")
    assert eager["cost"] == pytest.approx(relative(WORK + 2 * RESTART), abs=1e-3)
    assert (eager["launches"], eager["preemptions"], eager["refused"], eager["missed"]) == (2, 1, 0, False)
    ours = control_plane(east, west, deadline="none")
    assert ours["cost"] <= eager["cost"] + 1e-9 and ours["missed"] is False


def test_the_sweep_prints_each_zone_and_setting_beside_greedy(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, "us-east-1a", [1] * 30 + [0] * 6 + [1] * 200)
    argv = [sys.executable, str(ROOT / "benchmarks" / "spot_policy.py"), "--control-plane", "--sweep",
            "--trace", str(trace), "--work-hours", "3", "--ratios", "0.5,0.9", "--restarts", "0.2",
            "--starts", "1", "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert [(r["zone"], r["ratio"], r["restart_hours"]) for r in rows] == [
        ("us-east-1a", 0.5, 0.2),
        ("us-east-1a", 0.9, 0.2),
    ]
    assert all(r["missed"] == 0 and r["control_plane"] <= r["greedy"] + 1e-9 for r in rows)


def test_the_replay_only_sweep_judges_the_replay_and_runs_no_control_plane(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, "us-east-1a", [1] * 30 + [0] * 6 + [1] * 200)
    argv = [sys.executable, str(ROOT / "benchmarks" / "spot_policy.py"), "--control-plane", "--sweep",
            "--replay-only", "--trace", str(trace), "--work-hours", "3", "--ratios", "0.9", "--restarts",
            "0.05,0.2", "--starts", "2"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "mean over zones per setting (replay vs greedy)" in done.stdout
    assert "at or below greedy in 2 of 2 zone x setting cells" in done.stdout
    rows = [json.loads(line) for line in subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT, check=True
    ).stdout.splitlines()]  # fmt: skip
    assert [(r["restart_hours"], r["control_plane"]) for r in rows] == [(0.05, None), (0.2, None)]
    assert all(r["replay"] <= r["greedy"] + 1e-9 and r["missed"] == 0 for r in rows)
