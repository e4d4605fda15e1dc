"""The events the control plane wakes on, decoded at the edge: `instances` (EventBridge EC2 events and
skyless.local events -> `InstanceEvent`), `gcp_preemptions` and `azure_preemptions` (the same from GCP's
audit log via Pub/Sub and Azure's Event Grid) and `sqs_batch` (an SQS batch -> one call per message, with
Lambda's partial batch response).
"""

__all__ = ["azure_preemptions", "gcp_preemptions", "instances", "sqs_batch"]
