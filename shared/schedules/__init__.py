"""Cron-scheduled jobs: `cron` parses and evaluates expressions (pure); `operations` creates, lists, pauses
and deletes schedules (DynamoDB + EventBridge Scheduler) and turns one firing into one job.
"""

__all__ = ["cron", "operations"]
