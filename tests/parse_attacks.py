"""The task files issue 19 used to make the YAML reader choke, and a fresh interpreter to parse one in
while measuring its wall time and peak memory (ru_maxrss)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from shared.task.limits import MAX_YAML_DEPTH, MAX_YAML_DOCUMENTS

ROOT = Path(__file__).resolve().parents[1]


def billion_laughs(levels: int = 9) -> str:
    """About 1 KB: each anchor a list of nine aliases of the one before, 9**levels strings once expanded."""
    lines = ['  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    return "name: laughs\nrun: echo hi\nfile_mounts:\n" + "\n".join(lines) + "\n"


def deep_flow(levels: int) -> str:
    return "run: echo hi\nenvs:\n  X: " + "[" * levels + "]" * levels + "\n"


def deep_block(levels: int) -> str:
    return "run: echo hi\nconfig:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(levels))


def many_documents(count: int) -> str:
    return "".join(f"---\nname: t{i}\nrun: echo {i}\n" for i in range(count))


# name: (text, the limit it passes, the line the refusal names)
ATTACKS = {
    "billion laughs": (billion_laughs(), "values", 8),  # l4, the first anchor past the value limit
    "5,000 flow levels": (deep_flow(5000), "nesting depth", 3),
    "600 block levels": (deep_block(600), "nesting depth", 2 + MAX_YAML_DEPTH),
    "1,000 documents": (many_documents(1000), "documents", 3 * MAX_YAML_DOCUMENTS + 1),
}

_MEASURE = """
import json, resource, sys, time
from shared.errors import TaskFileError
from shared.task import load_pipeline
text = sys.stdin.read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu_start = time.perf_counter(), time.process_time()
try:
    load_pipeline(text, filename="attack.yaml")
    error = None
except TaskFileError as exc:
    error = exc.to_dict()
seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "grown_kib": grown, "error": error}))
"""


def parse_in_fresh_process(text: str) -> dict[str, Any]:
    """{"seconds": wall time of the parse, "cpu_seconds": its CPU time, "grown_kib": peak memory it added,
    "error": the TaskFileError as a dict}."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE], input=text, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured: dict[str, Any] = json.loads(done.stdout)
    return measured
