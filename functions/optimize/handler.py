"""Lambda: the optimize queue -> plan the job (shared.jobs.planning)."""

from typing import Any

from shared.events.sqs_batch import for_each_sqs_message
from shared.jobs.planning import plan_job


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return for_each_sqs_message(event, plan_job)
