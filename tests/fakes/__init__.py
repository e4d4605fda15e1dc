"""Local HTTP servers that speak the documented APIs of GCP Compute Engine, Azure Resource Manager,
Lambda Cloud and RunPod, with in-memory state and injectable failures. See README.md."""
