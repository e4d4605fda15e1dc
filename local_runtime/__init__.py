"""The embedded local default: the whole control plane on this machine."""
