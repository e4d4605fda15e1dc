"""What a person waits for when typing a `skyless` verb: the CPU time of the whole process, per verb.

Usage: .venv/bin/python benchmarks/cli_speed.py [--runs N] [--baseline DIR]

Each verb (`--help`, `status`, `queue`, `gpus`, `logs --help`) runs as a user types it, through the installed
`skyless` entry point with this tree first on PYTHONPATH, against a local runtime the script starts in a
temporary home (on free ports) and stops at the end, so `status` and `queue` measure the client, not a first
start. Each run pairs every verb with a fixed floor (`python -c "import typer"`), and with SkyPilot's `sky`
where it is installed. --baseline DIR runs the same verbs from another checkout (e.g. the previous commit's
worktree) in the same runs. Prints min, median and max CPU seconds (user + system, from wait4) over --runs
processes (>= 5) and the ratio of each verb to the floor, and to `sky`, per run: min, median, max.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERBS: dict[str, list[str]] = {
    "--help": ["--help"],
    "status": ["status"],
    "queue": ["queue"],
    "gpus": ["gpus"],
    "logs --help": ["logs", "--help"],
}
SKY_VERBS: dict[str, list[str]] = {"gpus": ["show-gpus"]}  # SkyPilot's name; the rest are the same words


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """The CPU time (user + system) of one whole process, which must exit 0."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spread(values: list[float], unit: str = "s", digits: int = 3) -> str:
    return (
        f"min {min(values):.{digits}f}{unit}  median {statistics.median(values):.{digits}f}{unit}  "
        f"max {max(values):.{digits}f}{unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same runs")
    args = parser.parse_args()
    runs = max(5, args.runs)
    entry = Path(sys.executable).parent / "skyless"
    sky = shutil.which("sky")
    with tempfile.TemporaryDirectory(prefix="cli-speed-") as home:
        base = {k: v for k, v in os.environ.items() if not k.startswith("SKYLESS_")}
        env = {
            **base,
            "HOME": home,
            "PYTHONPATH": str(ROOT),
            "SKYLESS_LOCAL_MOTO_PORT": str(free_port()),
            "SKYLESS_LOCAL_API_PORT": str(free_port()),
        }
        trees: dict[str, dict[str, str]] = {"skyless": env}
        if args.baseline:
            trees["baseline"] = {**env, "PYTHONPATH": str(args.baseline.resolve())}
        subprocess.run([str(entry), "local", "up"], cwd=ROOT, env=env, check=True, capture_output=True)
        try:
            for tree_env in trees.values():  # compile bytecode, warm the runtime's first answers: unmeasured
                for words in VERBS.values():
                    cpu_seconds([str(entry), *words], tree_env)
            floor: list[float] = []
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(runs):
                floor.append(cpu_seconds([sys.executable, "-c", "import typer"], env))
                for verb, words in VERBS.items():
                    for tree, tree_env in trees.items():
                        times.setdefault((tree, verb), []).append(cpu_seconds([str(entry), *words], tree_env))
                    if sky:
                        sky_words = SKY_VERBS.get(verb, words)
                        times.setdefault(("sky", verb), []).append(cpu_seconds([sky, *sky_words], base))
        finally:
            subprocess.run([str(entry), "local", "down"], cwd=ROOT, env=env, capture_output=True)
    print(f"CPU seconds of the whole process, {runs} runs; floor `python -c 'import typer'`: {spread(floor)}")
    for verb in VERBS:
        for tree in (*trees, *(("sky",) if sky else ())):
            values = times[(tree, verb)]
            ratios = [value / low for value, low in zip(values, floor, strict=True)]
            line = f"{tree:8} {verb:12} {spread(values)}  ÷ floor {spread(ratios, 'x', 2)}"
            if tree == "skyless" and "baseline" in trees:
                before = [b / value for b, value in zip(times[("baseline", verb)], values, strict=True)]
                line += f"  baseline ÷ this {spread(before, 'x', 2)}"
            if tree != "sky" and sky:
                versus = [s / value for s, value in zip(times[("sky", verb)], values, strict=True)]
                line += f"  sky ÷ this {spread(versus, 'x', 2)}"
            print(line)
    if not sky:
        print("SkyPilot's `sky` is not installed here: no side-by-side ratio with it")


if __name__ == "__main__":
    main()
