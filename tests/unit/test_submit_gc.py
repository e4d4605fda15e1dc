"""A cold start of the API or the submit function does not spend its CPU scanning young objects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collections_while_importing(module: str) -> int:
    probe = (
        "import gc, json\n"
        "counts = [0]\n"
        "gc.callbacks.append(lambda phase, info: counts.__setitem__(0, counts[0] + (phase == 'start')))\n"
        f"import {module}\n"
        "print(json.dumps(counts[0]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout.splitlines()[-1]))


def test_a_cold_api_or_submit_import_runs_the_collector_a_few_times_not_hundreds() -> None:
    for module in ("functions.submit.app", "functions.submit.handler"):
        assert collections_while_importing(module) < 20, module
    assert collections_while_importing("shared.store.users") > 20  # the default: the probe does count
