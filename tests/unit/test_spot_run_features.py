"""`benchmarks/spot_run_features.py`, run as a user types it, on a trace whose spot runs are known by hand:
the run statistics, the Kaplan-Meier residual life (the run still going at the trace's end censored, not
counted as ended) and the split by the outage before each run are those worked out here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def features(tmp_path: Path, data: list[int], work_hours: float = 1.0, nodes: int = 1) -> dict[str, Any]:
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 1800}, "data": data}))
    script = str(ROOT / "benchmarks" / "spot_run_features.py")
    argv = [sys.executable, script, "--json", "--trace", str(trace), "--nodes", str(nodes), "--work-hours",
            str(work_hours), "--restart-hours", "0.2", "--start-hours", "0,2", "--on-demand-price", "3",
            "--spot-price", "1"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_runs_residual_life_and_outage_split_are_the_hand_worked_ones(tmp_path: Path) -> None:
    # Ticks of 0.5 h: runs of 0.5 h, 2 h (after a 0.5 h outage), 1 h (after a 1 h outage), then 1.5 h still
    # going at the trace's end (censored: it did not end there).
    report = features(tmp_path, [1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1])
    zone = report["traces"]["zones"]["us-east-1a"]
    assert zone["runs"] == 4
    assert zone["median_h"] == pytest.approx(1.0)
    assert zone["mean_h"] == pytest.approx(3.5 / 3)
    by_age = {row["age_h"]: row for row in report["traces"]["residual_life"]}
    # Kaplan-Meier from age 0: S = 3/4 after 0.5 h, 1/2 after 1 h, still 1/2 past the censored 1.5 h, 0 at
    # 2 h: mean left 0.5 + 0.5 * 3/4 + 1 * 1/2 = 1.375 h (1.25 h if the censored run counted as ended).
    assert by_age[0.0]["mean_left_h"] == pytest.approx(1.375)
    assert by_age[0.0]["p_ends_within_0.5h"] == pytest.approx(0.25)
    assert by_age[0.0]["runs"] == 4
    # From age 1 h: the censored run (0.5 h left, not ended) and the 2 h one (1 h left).
    assert by_age[1.0]["mean_left_h"] == pytest.approx(1.0)
    assert by_age[1.0]["p_ends_within_0.5h"] == pytest.approx(0.0)
    assert by_age[1.0]["runs"] == 2
    after = report["traces"]["after_outage"]
    assert after["short"]["runs"] == 1 and after["short"]["mean_h"] == pytest.approx(2.0)
    assert after["long"]["runs"] == 1 and after["long"]["mean_h"] == pytest.approx(1.0)


def test_runs_are_split_by_the_partial_capacity_before_them(tmp_path: Path) -> None:
    # 4 nodes, ticks of 0.5 h: a 1 h run of all 4 after a sample with 2 of them, then a 1.5 h run after none
    # (the hour before it empty), then partial capacity only (no run).
    report = features(tmp_path, [0, 2, 4, 4, 0, 0, 4, 4, 4, 0, 3, 3], nodes=4)
    partial = report["traces"]["partial"]
    assert {kind: (row["runs"], row["mean_h"]) for kind, row in partial.items()} == {
        "after some": (1, pytest.approx(1.0)),
        "after none": (1, pytest.approx(1.5)),
        "partial in the hour before": (1, pytest.approx(1.0)),
        "none partial in the hour": (1, pytest.approx(1.5)),
    }


def test_knowing_the_runs_changes_nothing_where_spot_never_ends(tmp_path: Path) -> None:
    report = features(tmp_path, [1] * 40, work_hours=4.0)
    assert report["traces"]["zones"]["us-east-1a"]["runs"] == 1
    assert report["leaving_on_demand"]["launches"] == 0
    costs = {label: told["cost"] for label, told in report["told"].items()}
    assert set(costs) == {"none", "ranking", "reserve", "leaving on-demand", "all three"}
    # One launch of 4.2 h on spot at $1/h, against 4.2 h of on-demand at $3/h.
    assert all(cost == pytest.approx(1 / 3) for cost in costs.values())
    assert report["best"] == pytest.approx(1 / 3)
