"""Lambda: the provision queue -> launch (fail over, wait) or tear down (shared.jobs.provisioning)."""

from typing import Any

from shared.events.sqs_batch import for_each_sqs_message
from shared.jobs.provisioning import provision_job


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return for_each_sqs_message(event, provision_job)
