"""Lambda: the submit queue -> run an uploaded task file (shared.uploads) or a schedule firing."""

from typing import Any

from shared.config import Settings
from shared.schedules import firing_in, run_firing
from shared.sqs_batch import for_each_sqs_message
from shared.uploads import submit_uploads


def submit_from_message(body: dict[str, Any]) -> Any:
    settings = Settings.from_env()
    firing = firing_in(body)
    if firing is not None:
        return run_firing(settings, firing)
    return submit_uploads(settings, body)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return for_each_sqs_message(event, submit_from_message)
