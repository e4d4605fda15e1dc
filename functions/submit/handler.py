"""Lambda: the submit queue -> run an uploaded task file (shared.uploads.intake) or a schedule firing
(shared.schedules.operations); the events table's stream (terminal state events) -> runs/<job>/status.json."""

from typing import Any

from shared.config import Settings
from shared.events.sqs_batch import for_each_sqs_message
from shared.jobs.run_status import record_finished_runs
from shared.uploads.intake import submit_uploads


def submit_from_message(body: dict[str, Any]) -> Any:
    settings = Settings.from_env()
    if body.get("schedule_firing") is not None:  # schedules and cron: imported for firings only
        from shared.schedules.operations import firing_in, run_firing

        firing = firing_in(body)
        if firing is not None:
            return run_firing(settings, firing)
    return submit_uploads(settings, body)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records") or []
    if records and records[0].get("eventSource") == "aws:dynamodb":
        failed = record_finished_runs(Settings.from_env(), records)
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
    return for_each_sqs_message(event, submit_from_message)
