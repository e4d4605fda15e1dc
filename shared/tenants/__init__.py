"""Who uses a deployment, administered: `admin` creates, lists and revokes users, forms teams, grants and
revokes buckets, and writes each change to the append-only audit log (shared/store/audit.py); `members` is
what a team's members see of each other (jobs and clusters, read-only). What a grant lets a task reach is
shared/storage/access.py's rule.
"""

__all__ = ["admin", "members"]
