"""Typed views of the events the control plane wakes on (EventBridge EC2 events, skyless.local events)."""
