"""The events the control plane wakes on, decoded at the edge: `instances` (EventBridge EC2 events and
skyless.local events -> `InstanceEvent`) and `sqs_batch` (an SQS batch -> one call per message, with
Lambda's partial batch response).
"""

__all__ = ["instances", "sqs_batch"]
