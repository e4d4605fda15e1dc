"""Azure Functions (Python v2 programming model) entry point: an Event Grid trigger on the Resource
Notifications - Health Resources system topic; a `VirtualMachinePreempted` annotation -> the same core as
EventBridge's spot warnings.

The host loads `function_app.py` at the app root; a deployment's one is `from functions.spot_watch.azure_app
import app` (README: GCP and Azure preemption events). It reaches the stack's DynamoDB and SQS with the AWS
settings in its app settings (SKYLESS_PREFIX, AWS_REGION, keys from Key Vault references).
"""

from __future__ import annotations

import logging

import azure.functions as func

from shared.events.azure_preemptions import parse_preemption_annotation
from shared.jobs.instance_events import handle_instance_event
from shared.jobs.outcomes import Outcome

app = func.FunctionApp()


@app.function_name(name="skyless_preemption")
@app.event_grid_trigger(arg_name="event")
def on_preemption_event(event: func.EventGridEvent) -> None:
    """Recover the job whose VM was preempted; other annotations and events change nothing. An error
    propagates, so Event Grid retries the delivery (its retry policy)."""
    data = event.get_json()
    event_name = event.id
    # An EventGridEvent (Event Grid schema); a subscription delivering the CloudEvents schema gives `type`.
    event_type = str(getattr(event, "event_type", None) or getattr(event, "type", ""))
    parsed = parse_preemption_annotation(event_type, data if isinstance(data, dict) else None)
    outcome = Outcome.ALREADY_DONE if parsed is None else handle_instance_event(parsed)
    logging.getLogger("skyless.spot_watch").info("preemption event %s: %s", event_name, outcome)
