"""A stand-in for `torchrun` that parses its launch options exactly as torch/distributed/run.py does
(`parse_min_max_nnodes`, `determine_local_world_size`, `--node_rank`/`--master_port` as int), then prints
what it would launch instead of starting workers. torch itself is ~2 GB; the argument rules are what a
SkyPilot task file depends on (`--nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE`).

Run as `python tests/fakes/torchrun.py ARGS...`; exits 1 with torchrun's own error text on a bad value.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_min_max_nnodes(nnodes: str) -> tuple[int, int]:
    parts = nnodes.split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')


def determine_local_world_size(nproc_per_node: str) -> int:
    try:
        return int(nproc_per_node)
    except ValueError as error:
        if nproc_per_node in ("cpu", "auto"):  # no GPUs here: torchrun falls back to the CPU count
            return os.cpu_count() or 1
        raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}") from error


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="torchrun")
    parser.add_argument("--nnodes", type=str, default="1:1")
    parser.add_argument("--nproc_per_node", "--nproc-per-node", type=str, default="1")
    parser.add_argument("--node_rank", "--node-rank", type=int, default=0)
    parser.add_argument("--master_addr", "--master-addr", default="127.0.0.1", type=str)
    parser.add_argument("--master_port", "--master-port", default=29500, type=int)
    parser.add_argument("training_script", type=str)
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        min_nodes, max_nodes = parse_min_max_nnodes(args.nnodes)
        nproc = determine_local_world_size(args.nproc_per_node)
    except (ValueError, RuntimeError) as error:
        print(f"torchrun: error: {error}", file=sys.stderr)
        return 1
    print(
        f"torchrun launching nproc_per_node={nproc} nnodes={min_nodes}:{max_nodes} node_rank={args.node_rank}"
        f" master={args.master_addr}:{args.master_port} script={args.training_script}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
