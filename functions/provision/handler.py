"""Lambda: the provision queue -> launch (fail over, wait) or tear down a job's cluster
(shared.jobs.provisioning), or one step of a named cluster: launch, start, stop, down, autostop check
(shared.clusters.provisioning). The teardown queue feeds it too, through its own event source, so a job's
teardown never waits behind a burst of launches."""

from typing import Any

from shared.clusters.messages import is_cluster_message
from shared.events.sqs_batch import for_each_sqs_message
from shared.jobs.outcomes import Outcome
from shared.jobs.provisioning import provision_job


def provision_or_cluster_step(body: dict[str, Any]) -> Outcome:
    if not is_cluster_message(body):
        return provision_job(body)
    # Imported here: a job's launch (most cold starts) never needs the named clusters' path.
    from shared.clusters.provisioning import cluster_step

    return cluster_step(body)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return for_each_sqs_message(event, provision_or_cluster_step)
