"""Loading a SkyPilot catalog folder: skyless side by side with SkyPilot's pandas load of the same files.

Usage: .venv/bin/python benchmarks/catalog_load.py [--catalog DIR] [--repeat N] [--cold-runs N]

SkyPilot reads each `<cloud>/vms.csv` with `pandas.read_csv` (sky/catalog/common.py `read_catalog`);
skyless converts the same folder into its offerings (`import_skypilot_catalog`: GCP GPUs attached to
their hosts, TPUs as TPU VMs) and keeps the result as compact snapshots (`skyless catalog import`, and
`skyless plan --catalog DIR` from its second run on). Three comparisons, each printed with the ratio
pandas time / skyless time (above 1: skyless is faster):
- cold: a fresh interpreter per run that imports what it needs and loads the folder (what one
  `sky launch --dryrun` or one `skyless plan --catalog` pays); the median of --cold-runs;
- warm: in one process with everything imported, the median of --repeat loads;
- snapshot: the compact snapshot `plan --catalog` reads once the folder was converted, warm and cold.
Two floors, measured in the same run, show what any pure-Python import pays before it converts
anything: cutting every line of the files into cells (`str.split`), and making the offerings from
ready columns (the snapshot load, nearly all of it tuple building).
pandas is needed for the comparison only (`.venv/bin/pip install pandas`); it is not a dependency.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"

PANDAS_COLD = """
import glob, sys, time
start = time.perf_counter()
import pandas as pd
frames = [pd.read_csv(f) for f in sorted(glob.glob(sys.argv[1] + "/*/vms.csv"))]
print(time.perf_counter() - start, sum(len(f) for f in frames))
"""
SKYLESS_COLD = """
import sys, time
start = time.perf_counter()
from shared.catalog.skypilot_import import import_skypilot_catalog
offerings = import_skypilot_catalog(sys.argv[1])
print(time.perf_counter() - start, len(offerings))
"""
SNAPSHOT_COLD = """
import sys, time
start = time.perf_counter()
from shared.catalog.skypilot_cache import load_skypilot_folder
offerings = load_skypilot_folder(sys.argv[1])
print(time.perf_counter() - start, len(offerings))
"""


def cold(script: str, folder: Path, runs: int, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Median seconds (measured inside the fresh interpreter, from before its imports) and the row count."""
    times, count = [], 0
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", script, str(folder)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.split()
        times.append(float(out[0]))
        count = int(out[1])
    return statistics.median(times), count


def warm(load: Callable[[], object], repeat: int) -> float:
    load()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        load()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def line(what: str, pandas_s: float, skyless_s: float) -> str:
    times = f"pandas {pandas_s * 1000:8.1f} ms   skyless {skyless_s * 1000:8.1f} ms"
    return f"  {what:<34} {times}   ratio {pandas_s / skyless_s:5.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG, help="a SkyPilot catalog folder")
    parser.add_argument("--repeat", type=int, default=7, help="warm loads per measurement")
    parser.add_argument("--cold-runs", type=int, default=5, help="fresh interpreters per measurement")
    args = parser.parse_args()
    try:
        import pandas as pd
    except ImportError:
        sys.exit("pandas is needed for the comparison: .venv/bin/pip install pandas")
    if not args.catalog.is_dir():
        sys.exit(f"no catalog folder at {args.catalog}")

    import os

    from shared.catalog.files import offerings_from_compact, offerings_to_compact
    from shared.catalog.skypilot_import import import_skypilot_catalog

    files = sorted(args.catalog.glob("*/vms.csv"))
    print(f"catalog: {args.catalog} ({', '.join(p.parent.name for p in files)})")

    pandas_cold, rows = cold(PANDAS_COLD, args.catalog, args.cold_runs)
    skyless_cold, offerings = cold(SKYLESS_COLD, args.catalog, args.cold_runs)
    print(f"{rows} CSV rows -> {offerings} offerings")
    print("cold (a fresh process: imports + load, median):")
    print(line("CSV import", pandas_cold, skyless_cold))

    pandas_warm = warm(lambda: [pd.read_csv(f) for f in files], args.repeat)
    skyless_warm = warm(lambda: import_skypilot_catalog(args.catalog), args.repeat)
    split_floor = warm(
        lambda: [[row.split(",") for row in f.read_text().splitlines()] for f in files], args.repeat
    )
    print("warm (everything imported, median):")
    print(line("CSV import", pandas_warm, skyless_warm))
    print(line("floor: str.split of every line", pandas_warm, split_floor))

    blob = offerings_to_compact(import_skypilot_catalog(args.catalog))
    snapshot_warm = warm(lambda: offerings_from_compact(blob), args.repeat)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "SKYLESS_HOME": home}
        cold(SNAPSHOT_COLD, args.catalog, 1, env)  # the first plan --catalog converts and keeps the snapshots
        snapshot_cold, _ = cold(SNAPSHOT_COLD, args.catalog, args.cold_runs, env)
    print("snapshot (what plan --catalog and an imported catalog read after the first conversion):")
    print(line("cold, snapshot vs CSV", pandas_cold, snapshot_cold))
    print(line("warm, snapshot vs CSV (tuple floor)", pandas_warm, snapshot_warm))


if __name__ == "__main__":
    main()
