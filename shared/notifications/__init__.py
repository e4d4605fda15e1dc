"""Notifications: Slack incoming webhooks and SES email, driven by the events timeline.

`events` decides which timeline events notify and what the message says (pure); `slack` and `email` deliver;
`settings` keeps per-user settings and per-job overrides (webhook URLs as Secrets Manager secrets);
`records` is the table of settings and sends; `dispatch` turns one timeline event into deliveries (`sending`
makes one); `team_notices` tells a team's budget event to every member and the team's channel, and keeps it.
"""

__all__ = ["dispatch", "events", "settings", "stack_resources", "team_notices"]
