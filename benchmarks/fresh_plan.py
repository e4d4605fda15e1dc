"""Fresh plans against a baseline commit: what a person or a cold optimize function waits for, and a loud
failure when this tree is slower than the baseline.

Usage: .venv/bin/python benchmarks/fresh_plan.py [--baseline REV] [--runs N] [--catalog DIR] [--tolerance X]

Both trees (this working tree, and `git archive REV` of the baseline, default HEAD~1) are measured the same
way, runs interleaved, each in fresh interpreters, in CPU time of the process (a shared machine's wall time
says more about the neighbours than about the code):
- first plan: per anchor task (benchmarks/plan.py's single tasks and its 3-task chain), a catalog read
  afresh, then the first plan on it: reading the rows it needs, indexing them, planning;
- `plan` process: `skyless plan FILE` for a few examples, as a user types it, the whole process.
Catalogs: the built-in one, and the full SkyPilot catalog (default ../shared/catalog/skypilot/v8) imported
with each tree's own `skyless catalog import` into a HOME of its own. Each figure is min / median / max over
the runs and the ratio baseline median / this tree's median (above 1: this tree is faster). The script exits
1, saying REGRESSION, if any median of this tree is more than `--tolerance` times the baseline's.
It also counts, in this tree, the rows indexed and the calls of `host_defaults.in_families` per `plan`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"
EXAMPLES = ("examples/hello.yaml", "examples/gpu_a100x8.yaml", "examples/chain_train_eval_serve.yaml")

# Runs inside a tree: imports what both the baseline and this tree have, prints {anchor: CPU seconds}.
FIRST_PLANS = """
import json, sys, time
sys.path.insert(0, "benchmarks")
from plan import CHAIN, SINGLE_TASKS
from shared.catalog.model import load_default_catalog, reset_default_catalog
from shared.optimizer import plan_pipeline, plan_task

figures = {}
anchors = [(name, choice) for name, choice in SINGLE_TASKS.items()] + [("3-task chain", None)]
for name, choice in anchors:
    reset_default_catalog()
    start = time.process_time()
    catalog = load_default_catalog()
    try:
        if choice is None:
            plan_pipeline(CHAIN, catalog)
        else:
            plan_task(choice, 1, catalog, minimize="time" if name.startswith("time") else "cost")
    except Exception as error:  # a catalog without that hardware plans nothing: not a figure
        figures[name] = None
        continue
    figures[name] = time.process_time() - start
print(json.dumps(figures))
"""
PLAN_PROCESS = """
import resource, sys
sys.argv = ["skyless", "plan", sys.argv[1]]
try:
    from cli.main import app
    app()
except SystemExit:
    pass
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime, file=sys.stderr)
"""
COUNTS = """
import collections, json, sys
from shared.optimizer import host_defaults, index, misses, single_task
calls = collections.Counter()
counted = host_defaults.in_families
def in_families(*args):
    calls["in_families"] += 1
    return counted(*args)
for module in (host_defaults, index, misses, single_task):
    if hasattr(module, "in_families"):
        module.in_families = in_families
from typer.testing import CliRunner
from cli.main import app
CliRunner().invoke(app, ["plan", sys.argv[1]])
rows = sum(sum(index.index_builds(catalog).values()) for catalog in list(index._PARTS))
print(json.dumps({**calls, "rows indexed": rows}))
"""


def run_in(tree: Path, home: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "HOME": str(home), "SKYLESS_HOME": str(home / ".skyless")}
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=tree, env=env, capture_output=True, text=True, check=True
    )


def baseline_tree(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def import_catalog(tree: Path, home: Path, folder: Path) -> None:
    script = "import sys; from cli.main import app; sys.argv[0] = 'skyless'; app()"
    done = subprocess.run(
        [sys.executable, "-c", script, "catalog", "import", str(folder)],
        cwd=tree,
        env={
            **os.environ,
            "PYTHONPATH": str(tree),
            "HOME": str(home),
            "SKYLESS_HOME": str(home / ".skyless"),
        },
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"catalog import failed in {tree}: {done.stderr[-500:]}")


def spread(samples: list[float]) -> str:
    ms = sorted(s * 1e3 for s in samples)
    return f"{ms[0]:7.0f} {statistics.median(ms):7.0f} {ms[-1]:7.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD~1", help="the commit to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG, help="a SkyPilot catalog folder")
    parser.add_argument("--tolerance", type=float, default=1.15, help="slowest allowed median, x baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fresh-plan-") as scratch:
        base = baseline_tree(args.baseline, Path(scratch, "baseline").resolve())
        trees = {"baseline": base, "this tree": ROOT}
        homes: dict[tuple[str, str], Path] = {}
        for tree_name, tree in trees.items():
            homes[(tree_name, "built-in")] = Path(scratch, f"home-{tree_name}-builtin")
            homes[(tree_name, "built-in")].mkdir()
            if args.catalog.is_dir():
                home = Path(scratch, f"home-{tree_name}-full")
                home.mkdir()
                import_catalog(tree, home, args.catalog)
                homes[(tree_name, "full")] = home
        catalogs = sorted({c for _, c in homes}, key=lambda c: c != "built-in")
        first: dict[tuple[str, str, str], list[float]] = {}
        process: dict[tuple[str, str, str], list[float]] = {}
        for _ in range(args.runs):
            for catalog in catalogs:
                for tree_name, tree in trees.items():  # interleaved: both trees see the same neighbours
                    home = homes[(tree_name, catalog)]
                    figures = json.loads(run_in(tree, home, FIRST_PLANS).stdout.strip().splitlines()[-1])
                    for anchor, seconds in figures.items():
                        if seconds is not None:
                            first.setdefault((catalog, anchor, tree_name), []).append(seconds)
                    for example in EXAMPLES:
                        done = run_in(tree, home, PLAN_PROCESS, example)
                        seconds = float(done.stderr.strip().splitlines()[-1])
                        process.setdefault((catalog, example, tree_name), []).append(seconds)
        regressions = report(first, process, catalogs, args)
        print("\nthis tree, per `plan` process (full catalog when imported):")
        home = homes.get(("this tree", "full"), homes[("this tree", "built-in")])
        for example in EXAMPLES:
            counts = json.loads(run_in(ROOT, home, COUNTS, example).stdout.strip().splitlines()[-1])
            print(f"  {example:<40} {counts.get('rows indexed', 0):>7} rows indexed, "
                  f"{counts.get('in_families', 0):>7} in_families calls")  # fmt: skip
    if regressions:
        print("\nREGRESSION against " + args.baseline + ":\n  " + "\n  ".join(regressions))
        return 1
    print(f"\nno regression against {args.baseline} (tolerance {args.tolerance:g}x)")
    return 0


def report(
    first: dict[tuple[str, str, str], list[float]],
    process: dict[tuple[str, str, str], list[float]],
    catalogs: list[str],
    args: argparse.Namespace,
) -> list[str]:
    regressions = []
    print(f"CPU ms, min / median / max over {args.runs} runs; ratio = baseline median / this tree's median")
    for title, figures, names in (
        ("first plan on a freshly read catalog", first, None),
        ("`skyless plan FILE`, the whole process", process, EXAMPLES),
    ):
        for catalog in catalogs:
            print(f"\n{title}, {catalog} catalog:")
            columns = f"{'baseline (min med max)':>24} {'this tree (min med max)':>25} {'ratio':>6}"
            print(f"  {'anchor':<44} {columns}")
            anchors = names or sorted({a for c, a, _ in figures if c == catalog})
            for anchor in anchors:
                base, ours = (
                    figures.get((catalog, anchor, "baseline")),
                    figures.get((catalog, anchor, "this tree")),
                )
                if not base or not ours:
                    continue
                ratio = statistics.median(base) / statistics.median(ours)
                print(f"  {anchor:<44} {spread(base):>24} {spread(ours):>25} {ratio:>5.2f}x")
                if statistics.median(ours) > args.tolerance * statistics.median(base):
                    regressions.append(f"{title}, {catalog}: {anchor}: {ratio:.2f}x")
    return regressions


if __name__ == "__main__":
    sys.exit(main())
