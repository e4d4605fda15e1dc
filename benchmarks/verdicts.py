"""Verdict agreement with SkyPilot: for each task file of a folder, skyless's verdict (planned / infeasible /
rejected) beside SkyPilot's, the agreement, and every disagreement with both reasons.

Usage:
  .venv/bin/python benchmarks/verdicts.py [FOLDER ...] [--catalog DIR] [--clouds gcp,azure,lambda,vast]
      [--skypilot-python PATH] [--json OUT]

FOLDER defaults to tests/fixtures/skypilot_corpus and tests/fixtures/skypilot (every *.yaml below them).
Both sides plan with the same catalog folder (default ../shared/catalog/skypilot/v8) and the same enabled
clouds (default: every cloud of that folder).

skyless's verdict is `skyless plan FILE --catalog DIR --clouds ...`'s, computed in this process on the
same code path (read_task_file, load_pipeline with secrets deferred, plan_pipeline): a `NoOfferingError` is
"infeasible", any other `UserError` "rejected", anything else a crash (reported, and always a bug).

SkyPilot's verdict comes from `benchmarks/skypilot_verdict_driver.py`, run with --skypilot-python (a venv
with `pip install skypilot==0.14.1 kubernetes`; default $SKYPILOT_PYTHON) and HOME set to a temporary folder
whose ~/.sky/catalogs/v8 is a copy of the catalog folder. See that file for how the dry run is reproduced.
Without a SkyPilot python, only skyless's verdicts are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"
DEFAULT_FOLDERS = [ROOT / "tests" / "fixtures" / "skypilot_corpus", ROOT / "tests" / "fixtures" / "skypilot"]
DRIVER = ROOT / "benchmarks" / "skypilot_verdict_driver.py"
VERDICTS = ("planned", "infeasible", "rejected")
# The driver answers SkyPilot's online look-ups itself; one it missed still reaches the cut network. Such a
# row is shown apart ("unknown") and left out of the agreement rather than guessed.
MISSING_CATALOG = "ConnectionError: offline"


def task_files(folders: list[Path]) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.yaml") if p.is_file())


def skyless_verdict(path: Path, catalog: Any, clouds: set[str]) -> dict[str, str]:
    """What `skyless plan PATH --catalog DIR --clouds ...` concludes, without its printing."""
    from shared.errors import NoOfferingError, UserError
    from shared.optimizer import plan_pipeline
    from shared.task import load_pipeline, read_task_file

    try:
        text = read_task_file(path)
        pipeline = load_pipeline(text, filename=str(path), defer_secrets=True)
        plan_pipeline(pipeline, catalog, enabled_clouds=clouds, minimize="cost")
    except NoOfferingError as error:
        return {"verdict": "infeasible", "reason": str(error).splitlines()[0][:300]}
    except UserError as error:
        return {"verdict": "rejected", "reason": str(error).splitlines()[0][:300]}
    except Exception as error:  # a traceback `skyless plan` would show: always a bug
        return {"verdict": "crash", "reason": f"{type(error).__name__}: {error}"[:300]}
    return {"verdict": "planned", "reason": ""}


def skypilot_verdicts(
    files: list[Path], python: str, catalog_dir: Path, clouds: set[str]
) -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="skypilot-home-") as home:
        shutil.copytree(catalog_dir, Path(home) / ".sky" / "catalogs" / "v8")
        env = {**os.environ, "HOME": home, "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
        command = [python, str(DRIVER), "--clouds", ",".join(sorted(clouds)), *map(str, files)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    results: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if MISSING_CATALOG in row["reason"]:
                row = {**row, "verdict": "unknown"}
            results[row["file"]] = row
    if len(results) != len(files):
        raise SystemExit(f"the SkyPilot driver answered {len(results)} of {len(files)} files:\n{done.stderr}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG)
    parser.add_argument("--clouds", default=None)
    parser.add_argument("--skypilot-python", default=os.environ.get("SKYPILOT_PYTHON"))
    parser.add_argument("--json", type=Path, default=None, help="Also write every row to this file.")
    parser.add_argument(
        "--skypilot-verdicts",
        type=Path,
        default=None,
        help="Reuse SkyPilot's verdicts from this file when it exists (they do not depend on skyless's code, "
        "and take minutes), else compute and write them there.",
    )
    args = parser.parse_args()

    from shared.catalog import Catalog, load_skypilot_folder

    files = task_files(args.folders or DEFAULT_FOLDERS)
    catalog = Catalog(load_skypilot_folder(args.catalog), sources=[str(args.catalog)])
    clouds = set(args.clouds.split(",")) if args.clouds else set(catalog.clouds())
    started = time.perf_counter()
    ours = {str(p): skyless_verdict(p, catalog, clouds) for p in files}
    ours_seconds = time.perf_counter() - started
    print(f"{len(files)} task files; clouds {', '.join(sorted(clouds))}; catalog {args.catalog}")
    print(f"skyless: {dict(Counter(r['verdict'] for r in ours.values()))} in {ours_seconds:.1f} s")
    crashes = {f: r for f, r in ours.items() if r["verdict"] == "crash"}
    for file, row in crashes.items():
        print(f"  CRASH {file}: {row['reason']}")
    cached = args.skypilot_verdicts
    if cached is not None and cached.exists():
        by_name = json.loads(cached.read_text())
        theirs = {str(p): by_name[os.path.relpath(p, ROOT)] for p in files}
        print(f"SkyPilot: {dict(Counter(r['verdict'] for r in theirs.values()))} (from {cached})")
    elif not args.skypilot_python:
        print("no --skypilot-python (or $SKYPILOT_PYTHON): SkyPilot's verdicts not computed")
        return
    else:
        started = time.perf_counter()
        theirs = skypilot_verdicts(files, args.skypilot_python, args.catalog, clouds)
        print(
            f"SkyPilot: {dict(Counter(r['verdict'] for r in theirs.values()))} "
            f"in {time.perf_counter() - started:.1f} s"
        )
        if cached is not None:
            cached.write_text(
                json.dumps({os.path.relpath(f, ROOT): row for f, row in theirs.items()}, indent=1)
            )
    rows = []
    for path in files:
        file = str(path)
        rows.append({"file": os.path.relpath(file, ROOT), "skyless": ours[file], "skypilot": theirs[file]})
    unknown = [r for r in rows if r["skypilot"]["verdict"] == "unknown"]
    for row in unknown:
        print(f"  SkyPilot needed the network for {row['file']}: {row['skypilot']['reason']}")
    rows = [r for r in rows if r not in unknown]
    agree = [r for r in rows if r["skyless"]["verdict"] == r["skypilot"]["verdict"]]
    pairs = Counter((r["skypilot"]["verdict"], r["skyless"]["verdict"]) for r in rows)
    print(f"agreement: {len(agree)}/{len(rows)} = {100 * len(agree) / len(rows):.1f} %")
    print("SkyPilot -> skyless counts: " + ", ".join(f"{a}->{b}: {n}" for (a, b), n in sorted(pairs.items())))
    for row in rows:
        if row in agree:
            continue
        print(f"\n{row['file']}: SkyPilot {row['skypilot']['verdict']}, skyless {row['skyless']['verdict']}")
        print(f"  SkyPilot: {row['skypilot']['reason'] or '-'}")
        print(f"  skyless:  {row['skyless']['reason'] or '-'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
