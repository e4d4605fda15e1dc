"""What `import skyless` costs a notebook, next to `import sky`'s usual first dependency, `import boto3`.

Usage: .venv/bin/python benchmarks/sdk_import.py [--runs N]

Each measure is a fresh interpreter timing its own import (the interpreter's start left out), with
bytecode already compiled by a first, unmeasured run. Prints min, median and max of each over --runs
processes (>= 5), the ratio of the medians, and which heavy modules the import loaded (none expected).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("boto3", "botocore", "moto", "httpx", "pydantic", "typer", "rich")
PROBE = (
    "import sys, time, json; t = time.perf_counter(); import {module}; "
    "ms = (time.perf_counter() - t) * 1000; "
    "print(json.dumps([ms, [m for m in {heavy!r} if m in sys.modules]]))"
)


def measure(module: str, runs: int) -> tuple[list[float], list[str]]:
    code = PROBE.format(module=module, heavy=HEAVY)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)  # compile once
    times: list[float] = []
    loaded: list[str] = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
        )
        ms, loaded = json.loads(out.stdout)
        times.append(ms)
    return times, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = max(5, parser.parse_args().runs)
    ours, loaded = measure("skyless", runs)
    floor, _ = measure("boto3", runs)
    for name, times in (("import skyless", ours), ("import boto3", floor)):
        print(f"{name:15} min {min(times):6.1f} ms  median {statistics.median(times):6.1f} ms  "
              f"max {max(times):6.1f} ms  ({runs} runs)")  # fmt: skip
    print(f"ratio skyless / boto3 (medians): {statistics.median(ours) / statistics.median(floor):.2f}")
    print(f"heavy modules loaded by import skyless: {', '.join(loaded) or 'none'}")


if __name__ == "__main__":
    main()
