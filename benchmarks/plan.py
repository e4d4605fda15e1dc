"""Plan latency: warm plans per kind of task, a 3-task chain, and cold start in a fresh process.

Usage: .venv/bin/python benchmarks/plan.py [--catalog DIR] [--repeat N] [--cold-runs N]

Catalogs: the built-in one, and a SkyPilot catalog folder (default ../shared/catalog/skypilot/v8
when it exists). "Warm" is the median and p99 of repeated plans in one process after a first plan
(index built). "Cold start" runs a fresh interpreter that imports the optimize path
(`functions.optimize.handler` when it exists, and `shared.optimizer` alone), loads the catalog and
returns the first plan; it reports the median wall time of several runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.catalog import Catalog, load_default_catalog  # noqa: E402
from shared.optimizer import plan_pipeline, plan_task  # noqa: E402
from shared.resources import ResourceChoice, ResourceRequest  # noqa: E402

SHARED_CATALOG = ROOT.parent / "shared" / "catalog" / "skypilot" / "v8"

SINGLE_TASKS: dict[str, ResourceChoice] = {
    "one GPU (A100:1)": ResourceChoice((ResourceRequest(accelerator="A100", accelerator_count=1),)),
    "8xA100 any_of (A100, A100-80GB, H100)": ResourceChoice(
        tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "A100-80GB", "H100"))
    ),
    "CPU-only cpus 8+": ResourceChoice((ResourceRequest(cpus=8),)),
    "pinned region (cpus 8+, gcp/us-central1)": ResourceChoice(
        (ResourceRequest(cpus=8, cloud="gcp", region="us-central1"),)
    ),
    "spot (L4:1 use_spot)": ResourceChoice(
        (ResourceRequest(accelerator="L4", accelerator_count=1, use_spot=True),)
    ),
    "time objective (any_of A100:8, H100:8)": ResourceChoice(
        tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "H100"))
    ),
}


@dataclass
class ChainTask:
    name: str
    choice: ResourceChoice
    num_nodes: int = 1
    inputs: dict[str, float] | None = None
    outputs_gb: float = 0.0

    @property
    def inputs_gb(self) -> float:
        return next(iter(self.inputs.values())) if self.inputs else 0.0

    def resource_choice(self) -> ResourceChoice:
        return self.choice


@dataclass
class Chain:
    tasks: list[ChainTask] = field(default_factory=list)
    execution: str = "serial"


CHAIN = Chain(
    [
        ChainTask(
            "preprocess",
            ResourceChoice((ResourceRequest(cpus=16),)),
            inputs={"s3://bucket/raw": 500},
            outputs_gb=200,
        ),
        ChainTask(
            "train",
            ResourceChoice(
                tuple(ResourceRequest(accelerator=a, accelerator_count=8) for a in ("A100", "H100"))
            ),
            num_nodes=2,
            outputs_gb=50,
        ),
        ChainTask("serve", ResourceChoice((ResourceRequest(accelerator="L4", accelerator_count=1),))),
    ]
)


def time_calls(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples) * 1e3, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3


def warm_figures(label: str, catalog: Catalog, repeat: int) -> None:
    print(f"\n{label}: {len(catalog)} offerings")
    print(f"  {'task':<44} {'median ms':>10} {'p99 ms':>8}  best")
    for name, choice in SINGLE_TASKS.items():
        minimize = "time" if name.startswith("time") else "cost"
        try:
            best = plan_task(choice, 1, catalog, minimize=minimize)[0]
        except Exception as error:  # a catalog without that hardware: say so, keep going
            print(f"  {name:<44} {'-':>10} {'-':>8}  {type(error).__name__}: {error}")
            continue
        median, p99 = time_calls(lambda c=choice, m=minimize: plan_task(c, 1, catalog, minimize=m), repeat)
        chosen = f"{best.place} {best.instance_type} ${best.hourly_price:g}/h"
        print(f"  {name:<44} {median:>10.3f} {p99:>8.3f}  {chosen}")
    try:
        plan = plan_pipeline(CHAIN, catalog)
    except Exception as error:
        label = "3-task chain, s3 input + egress"
        print(f"  {label:<44} {'-':>10} {'-':>8}  {type(error).__name__}: {error}")
        return
    median, p99 = time_calls(lambda: plan_pipeline(CHAIN, catalog), max(10, repeat // 10))
    places = " -> ".join(t.chosen.cloud for t in plan.tasks)
    chosen = f"{places} total ${plan.total_cost:.2f}"
    print(f"  {'3-task chain, s3 input + egress':<44} {median:>10.3f} {p99:>8.3f}  {chosen}")


COLD_SCRIPT = """
import time
start = time.perf_counter()
{handler}
from shared.optimizer import plan_task
from shared.resources import ResourceChoice, ResourceRequest
{load}
plan_task(ResourceChoice((ResourceRequest(accelerator="A100", accelerator_count=8),)), 1, catalog)
print(time.perf_counter() - start, time.process_time())
"""

LOAD_DEFAULT = "from shared.catalog import load_default_catalog\ncatalog = load_default_catalog()"
LOAD_FOLDER = (
    "from shared.catalog import Catalog\nfrom shared.catalog_import import import_skypilot_catalog\n"
    "catalog = Catalog(import_skypilot_catalog({folder!r}))"
)


def cold_figures(label: str, load: str, runs: int, handler: bool) -> None:
    script = COLD_SCRIPT.format(load=load, handler="import functions.optimize.handler" if handler else "")
    label = f"{'functions.optimize.handler' if handler else 'shared.optimizer'}, {label}"
    inside, outside, cpu = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        command = [sys.executable, "-c", script]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        outside.append(time.perf_counter() - start)
        wall, process_cpu = out.stdout.strip().splitlines()[-1].split()
        inside.append(float(wall))
        cpu.append(float(process_cpu))
    print(
        f"  cold start, {label}: median {statistics.median(outside) * 1e3:.0f} ms per process; "
        f"import + load + first plan {statistics.median(inside) * 1e3:.0f} ms wall, "
        f"{statistics.median(cpu) * 1e3:.0f} ms CPU of the whole process ({runs} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHARED_CATALOG, help="a SkyPilot catalog folder")
    parser.add_argument("--repeat", type=int, default=500)
    parser.add_argument("--cold-runs", type=int, default=7)
    args = parser.parse_args()
    handler = importlib.util.find_spec("functions.optimize.handler") is not None
    print(f"functions.optimize.handler exists: {handler} (cold start measured through it when it does)")

    warm_figures("built-in catalog", load_default_catalog(), args.repeat)
    if args.catalog.is_dir():
        from shared.catalog_import import import_skypilot_catalog

        start = time.perf_counter()
        full = Catalog(import_skypilot_catalog(args.catalog))
        print(f"\n(imported {args.catalog} in {(time.perf_counter() - start) * 1e3:.0f} ms)")
        warm_figures(f"SkyPilot catalog {args.catalog}", full, args.repeat)
    print()
    for path in ([True] if handler else []) + [False]:
        cold_figures("built-in catalog", LOAD_DEFAULT, args.cold_runs, path)
    if args.catalog.is_dir():
        cold_figures(f"{args.catalog.name} folder", LOAD_FOLDER.format(folder=str(args.catalog)), 3, handler)


if __name__ == "__main__":
    main()
