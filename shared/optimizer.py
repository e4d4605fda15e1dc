"""The optimizer's public face: plan one task, or a pipeline of tasks jointly.

`plan_task` (shared.task_optimizer) turns a task's resource alternatives into its ordered failover
list; `plan_pipeline` (shared.pipeline_optimizer) places every task of a pipeline, counting egress
between them (shared.placement_solver). Both read the catalog through a per-process index
(shared.offering_index).
"""

from __future__ import annotations

from shared.pipeline_optimizer import plan_pipeline
from shared.placement_solver import EGRESS_PER_GB, Edge, Source
from shared.task_optimizer import DEFAULT_MAX_CANDIDATES, RELATIVE_THROUGHPUT, plan_task

__all__ = [
    "DEFAULT_MAX_CANDIDATES",
    "EGRESS_PER_GB",
    "RELATIVE_THROUGHPUT",
    "Edge",
    "Source",
    "plan_pipeline",
    "plan_task",
]
