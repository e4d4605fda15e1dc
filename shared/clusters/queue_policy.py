"""Which queued jobs of a cluster start now: first in, first out, side by side while accelerators last.

Pure. A job asks for `num_nodes` nodes (ranks 0..n-1 of the cluster) and `gpus` accelerators on each. A job
that asks for no accelerator gets its nodes to itself, so plain jobs run one after another, as the jobs of
a SkyPilot cluster without GPUs do; accelerator jobs share a node while their counts fit its accelerators.
The queue is strict FIFO: the first job that does not fit stops the pass, so no job is passed over forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class QueuedJob:
    number: int
    started: bool  # SETTING_UP or RUNNING: holds its share now
    num_nodes: int
    gpus: float  # per node; 0 = the whole node


@dataclass(frozen=True)
class Capacity:
    num_nodes: int
    gpus_per_node: float  # the cluster's accelerators per node (0 for a CPU cluster)


def demand(job: QueuedJob, capacity: Capacity) -> float:
    """A job's share of each of its nodes: its accelerators, or the whole node."""
    if job.gpus <= 0 or capacity.gpus_per_node <= 0:
        return math.inf
    return job.gpus


def fits_at_all(job: QueuedJob, capacity: Capacity) -> str | None:
    """Why the job could never run on this cluster (None: it can, once the nodes are free)."""
    if job.num_nodes > capacity.num_nodes:
        return f"it needs {job.num_nodes} nodes; the cluster has {capacity.num_nodes}"
    if job.gpus > 0 and job.gpus > capacity.gpus_per_node:
        have = f"{capacity.gpus_per_node:g}" if capacity.gpus_per_node else "no"
        return f"it needs {job.gpus:g} accelerators per node; the cluster's nodes have {have}"
    return None


def jobs_to_start(queue: list[QueuedJob], capacity: Capacity) -> list[int]:
    """The numbers of the queued (not started) jobs to start now, in order."""
    used = [0.0] * capacity.num_nodes
    whole = [False] * capacity.num_nodes
    ordered = sorted(queue, key=lambda j: j.number)
    for job in ordered:
        if job.started:
            _take(job, capacity, used, whole)
    starting: list[int] = []
    for job in ordered:
        if job.started:
            continue
        if fits_at_all(job, capacity) is not None or not _fits_now(job, capacity, used, whole):
            break
        _take(job, capacity, used, whole)
        starting.append(job.number)
    return starting


def _fits_now(job: QueuedJob, capacity: Capacity, used: list[float], whole: list[bool]) -> bool:
    share = demand(job, capacity)
    for rank in range(min(job.num_nodes, capacity.num_nodes)):
        if whole[rank]:
            return False
        if math.isinf(share):
            if used[rank] > 0:
                return False
        elif used[rank] + share > capacity.gpus_per_node + 1e-9:
            return False
    return True


def _take(job: QueuedJob, capacity: Capacity, used: list[float], whole: list[bool]) -> None:
    share = demand(job, capacity)
    for rank in range(min(job.num_nodes, capacity.num_nodes)):
        if math.isinf(share):
            whole[rank] = True
        else:
            used[rank] += share
