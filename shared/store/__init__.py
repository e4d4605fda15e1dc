"""DynamoDB state (pynamodb): `models` (tables bound to one Settings), `jobs` (the `JobStore`: every move
a conditional write with its timeline event), `schedules` and `users` (their tables).
"""

__all__ = ["jobs", "models", "schedules", "users"]
