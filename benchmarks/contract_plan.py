"""What a team's contracts cost a plan: the same tasks planned at list price and at the team's prices (two
discounts, one reservation), in one warm process on the built-in catalog, and the first plan at the team's
prices (re-pricing the discounted clouds' rows, once per process and terms).

Usage: .venv/bin/python benchmarks/contract_plan.py [--runs N]
Prints min / median / max milliseconds over the runs (at least 5) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

from shared.catalog.model import load_default_catalog
from shared.optimizer import TeamPrices, contracts_from_config, plan_pipeline
from shared.task import load_pipeline

TASKS = {
    "A100:8 x2": "resources:\n  accelerators: A100:8\nnum_nodes: 2\nrun: x\n",
    "cpus 8+": "resources:\n  cpus: 8+\nrun: x\n",
    "H100:8 spot": "resources:\n  accelerators: H100:8\n  use_spot: true\nrun: x\n",
}
CONTRACTS = {
    "contracts": {
        "discounts": [
            {"cloud": "aws", "family": "p4d", "on_demand": 32},
            {"cloud": "gcp", "on_demand": 20, "spot": 10},
        ],
        "reservations": [
            {"id": "cr-1", "cloud": "aws", "zone": "us-east-1a", "instance_type": "p4d.24xlarge", "count": 8}
        ],
    }
}


def timed(call: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = max(5, parser.parse_args().runs)
    catalog = load_default_catalog()
    prices = TeamPrices(contracts_from_config(CONTRACTS, "benchmark"))
    for name, text in TASKS.items():
        pipeline = load_pipeline(text, filename="t.yaml")
        plan_pipeline(pipeline, catalog)  # the list catalog read and indexed: not what is measured
        at_list = functools.partial(plan_pipeline, pipeline, catalog)
        at_team = functools.partial(plan_pipeline, pipeline, catalog, prices=prices)
        first = timed(at_team, 1)[0]
        listed, team = timed(at_list, runs), timed(at_team, runs)
        ratio = statistics.median(team) / statistics.median(listed)
        print(
            f"{name:12} first at team prices {first:6.1f} ms | warm list {min(listed):.2f}/"
            f"{statistics.median(listed):.2f}/{max(listed):.2f} ms | warm team {min(team):.2f}/"
            f"{statistics.median(team):.2f}/{max(team):.2f} ms | ratio {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
