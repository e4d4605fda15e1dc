"""Reports over what skyless already recorded: `provider_scorecard` (what each cloud, region and instance
family delivered: refusals, time to RUNNING, preemptions per spot-hour, node failures, cost against list;
pure), `provider_reads` (what a report reads, through the JobStore port) and `reliability_snapshot` (the
scorecard kept for the opt-in reliability prior of plans).
"""

__all__ = ["provider_reads", "provider_scorecard", "reliability_snapshot"]
