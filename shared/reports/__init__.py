"""Reports over what skyless already recorded: `provider_scorecard` (what each cloud, region and instance
family delivered: refusals, time to RUNNING, preemptions per spot-hour, node failures, cost against list;
pure) and `provider_reads` (what a report reads, through the JobStore port).
"""

__all__ = ["provider_reads", "provider_scorecard"]
