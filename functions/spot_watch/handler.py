"""Lambda: EC2 spot warnings / state changes and skyless.local events, delivered through the spot_watch
queue (or, as a plain EventBridge event, directly) -> recover the job whose node is going away."""

from typing import Any

from shared.events.sqs_batch import for_each_sqs_message
from shared.jobs.instance_events import watch_instance_event


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "detail-type" in event:
        return {"outcome": str(watch_instance_event(event))}
    return for_each_sqs_message(event, watch_instance_event)
