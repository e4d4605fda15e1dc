"""Budgets: `limits` (pure: notice thresholds, month boundaries, the words of a refusal) and `records`
(monthly budgets per user and the claims of notices, in the events table's `budgets` partition). What jobs
do with them is in shared/jobs/budget_checks.py.
"""

__all__ = ["limits", "records"]
