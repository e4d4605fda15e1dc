"""The optimizer: plan one task, or a pipeline of tasks jointly, into an ordered failover `Plan`.

`plan_task` (`single_task`) turns a task's resource alternatives into its ordered failover list;
`plan_pipeline` (`pipeline`) places every task of a pipeline, counting egress between them (`placement`).
Both read the catalog through a per-process index (`index`); `misses` says why nothing fits; `plan` holds
the result models (`Candidate`, `TaskPlan`, `Plan`, `Block`); `contract_terms` reads a team's
`Contracts` (discounts, reservations) from config and `contract_pricing` plans at those prices
(`TeamPrices`). Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.lazy_faces import lazy_face

if TYPE_CHECKING:
    from shared.optimizer.contract_pricing import TeamPrices, team_catalog
    from shared.optimizer.contract_terms import (
        Contracts,
        Reservation,
        contracts_from_config,
        merged_contracts,
    )
    from shared.optimizer.errors import locate_plan_error
    from shared.optimizer.pipeline import plan_pipeline
    from shared.optimizer.placement import EGRESS_PER_GB, Edge, Source
    from shared.optimizer.plan import Block, Candidate, Plan, TaskPlan, instance_family_of
    from shared.optimizer.reasons import missing_clouds, why_chosen
    from shared.optimizer.single_task import DEFAULT_MAX_CANDIDATES, RELATIVE_THROUGHPUT, plan_task

__all__ = [
    "DEFAULT_MAX_CANDIDATES",
    "EGRESS_PER_GB",
    "RELATIVE_THROUGHPUT",
    "Block",
    "Candidate",
    "Contracts",
    "Edge",
    "Plan",
    "Reservation",
    "Source",
    "TaskPlan",
    "TeamPrices",
    "contracts_from_config",
    "instance_family_of",
    "locate_plan_error",
    "merged_contracts",
    "missing_clouds",
    "plan_pipeline",
    "plan_task",
    "team_catalog",
    "why_chosen",
]

__getattr__ = lazy_face(
    __name__,
    {
        "TeamPrices": "shared.optimizer.contract_pricing",
        "team_catalog": "shared.optimizer.contract_pricing",
        "Contracts": "shared.optimizer.contract_terms",
        "Reservation": "shared.optimizer.contract_terms",
        "contracts_from_config": "shared.optimizer.contract_terms",
        "merged_contracts": "shared.optimizer.contract_terms",
        "locate_plan_error": "shared.optimizer.errors",
        "plan_pipeline": "shared.optimizer.pipeline",
        "EGRESS_PER_GB": "shared.optimizer.placement",
        "Edge": "shared.optimizer.placement",
        "Source": "shared.optimizer.placement",
        "Block": "shared.optimizer.plan",
        "Candidate": "shared.optimizer.plan",
        "Plan": "shared.optimizer.plan",
        "TaskPlan": "shared.optimizer.plan",
        "instance_family_of": "shared.optimizer.plan",
        "missing_clouds": "shared.optimizer.reasons",
        "why_chosen": "shared.optimizer.reasons",
        "DEFAULT_MAX_CANDIDATES": "shared.optimizer.single_task",
        "RELATIVE_THROUGHPUT": "shared.optimizer.single_task",
        "plan_task": "shared.optimizer.single_task",
    },
)
