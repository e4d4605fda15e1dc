"""GCP Cloud Functions (2nd gen) entry point `on_preemption_event`: a Pub/Sub CloudEvent carrying the
Cloud Logging LogEntry of `compute.instances.preempted` -> the same core as EventBridge's spot warnings.

Deployed with `--entry-point=on_preemption_event --trigger-topic=<the sink's topic>` and the build
variable `GOOGLE_FUNCTION_SOURCE=functions/spot_watch/gcp_main.py` (README: GCP and Azure preemption events).
It reaches the stack's DynamoDB and SQS with the AWS settings in its environment (SKYLESS_PREFIX, AWS_REGION,
keys).
"""

from __future__ import annotations

import logging

import functions_framework
from cloudevents.http import CloudEvent

from shared.events.gcp_preemptions import parse_pubsub_preemption
from shared.jobs.instance_events import handle_instance_event
from shared.jobs.outcomes import Outcome


@functions_framework.cloud_event
def on_preemption_event(cloud_event: CloudEvent) -> None:
    """Recover the job whose node was preempted; anything else changes nothing. An error (the stack
    unreachable) propagates, so Pub/Sub redelivers when the function is deployed with --retry."""
    event = parse_pubsub_preemption(cloud_event.get_data())
    event_name = cloud_event["id"]
    outcome = Outcome.ALREADY_DONE if event is None else handle_instance_event(event)
    logging.getLogger("skyless.spot_watch").info("preemption event %s: %s", event_name, outcome)
