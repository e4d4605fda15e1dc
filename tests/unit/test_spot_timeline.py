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
    """Spot for 2 h, then none: with 1.2 h of work and 0.8 h of slack left, on-demand now would hold the job
    to the end (the one-zone door), so both wait for spot and go on-demand at the safety net, each at its
    first check past it (the control plane checks every 5 min, the replay every 10)."""
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1] * 12 + [0] * 2 + [1] * 200}))
    lines = timeline(trace)
    assert lines[0].startswith("start 0 h: control plane 0.639 (2 launches, 2 refused, finished 3.65 h)")
    assert "replay 0.639 (2 launches, 1 refused, finished 3.73 h)" in lines[0]
    rows = [[cell.split() for cell in line.split("|")] for line in lines[2:5]]
    spot = ["0.00-", "2.00", "us-east-1a"]
    assert rows == [[spot, spot], [["2.25-", "3.65", "on-demand"], []], [[], ["2.33-", "3.73", "on-demand"]]]
    assert lines[5] == "on-demand hours: control plane 1.40, replay 1.40; spot hours: 2.00, 2.00"


def test_decisions_lists_every_answer_of_the_policy_in_both_runs(tmp_path: Path) -> None:
    trace = tmp_path / "us-east-1a_v100_1.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1] * 12 + [0] * 2 + [1] * 200}))
    lines = timeline(trace, "--decisions")
    ours, theirs = (
        lines.index("control plane: the policy's answers"),
        lines.index("replay: the policy's answers"),
    )
    assert lines[ours + 1].split()[:6] == ["0.000", "h", "ran", "-", "spot", "us-east-1a"]
    lost = [line for line in lines[theirs:] if "no spot capacity" in line]
    assert lost[0].split()[:5] == ["2.000", "h", "ran", "-", "wait"] and "most of its work" in lost[0]
    went = [line for line in lost if "on_demand" in line]
    assert len(went) == 1 and went[0].split()[:6] == ["2.333", "h", "ran", "-", "on_demand", "us-east-1a"]
    assert "one more wait would cross the safety net" in went[0]
