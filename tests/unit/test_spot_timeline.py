"""`benchmarks/spot_timeline.py`, run as a user types it: the clusters the control plane and the replay of its
policy ran, side by side, on a tiny trace whose right answer is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def timeline(trace: Path, *extra: str) -> list[str]:
    job = ["--nodes", "1", "--work-hours", "3", "--deadline-hours", "4", "--restart-hours", "0.2"]
    argv = [sys.executable, str(ROOT / "benchmarks" / "spot_timeline.py"), "--trace", str(trace), *job]
    argv += ["--start-hours", "0", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_both_runs_clusters_are_listed_side_by_side_with_their_hours(tmp_path: Path) -> None:
    """Spot for 2 h, then none for 20 min: with 1 h of slack both go on-demand at the preemption and stay."""
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1] * 12 + [0] * 2 + [1] * 200}))
    lines = timeline(trace)
    assert lines[0].startswith("start 0 h: control plane 0.639 (2 launches, 0 refused")
    assert "replay 0.639 (2 launches, 0 refused" in lines[0]
    rows = [[cell.split() for cell in line.split("|")] for line in lines[2:4]]
    assert rows == [[["0.00-", "2.00", "us-east-1a"]] * 2, [["2.00-", "3.40", "on-demand"]] * 2]
    assert lines[4] == "on-demand hours: control plane 1.40, replay 1.40; spot hours: 2.00, 2.00"


def test_decisions_lists_every_answer_of_the_policy_in_both_runs(tmp_path: Path) -> None:
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1] * 12 + [0] * 2 + [1] * 200}))
    lines = timeline(trace, "--decisions")
    ours, theirs = (
        lines.index("control plane: the policy's answers"),
        lines.index("replay: the policy's answers"),
    )
    assert lines[ours + 1].split()[:6] == ["0.000", "h", "ran", "-", "spot", "us-east-1a"]
    went = [line for line in lines[theirs:] if "no spot capacity" in line]
    assert len(went) == 1 and went[0].split()[:6] == ["2.000", "h", "ran", "-", "on_demand", "us-east-1a"]
