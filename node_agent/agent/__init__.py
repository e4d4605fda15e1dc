"""The skyless node agent, one module per part of a node's work:

- `api`: the API client (the one config fetch that trades the boot token for the agent token, reports)
- `mounts`: the workdir and file mounts; `buckets`: bucket mounts (signed S3 calls, mirrors, rclone creds)
- `runner`: SkyPilot's execution model for `setup` and `run`; `logs`: log shipping
- `preemption`: each cloud's metadata-service watcher; `containers`: `image_id: docker:...`
- `sandbox`: the local cloud's private mount namespace; `node`: the node's life from config to last report

Standard library only, Python >= 3.8, importing nothing of the control plane: a VM gets these modules as one
file (node_agent.user_data bundles them in `AGENT_MODULES` order), the local cloud runs the package.
"""

from node_agent.agent.api import AgentHttpError, http_request, log, with_retries
from node_agent.agent.logs import LogShipper
from node_agent.agent.mounts import clone_workdir, fetch_file_mounts, fetch_workdir
from node_agent.agent.node import Agent, main
from node_agent.agent.runner import TaskRunner, install_conda, skypilot_env
from node_agent.agent.sandbox import mount_namespace_works

__all__ = [
    "Agent",
    "AgentHttpError",
    "LogShipper",
    "TaskRunner",
    "clone_workdir",
    "fetch_file_mounts",
    "fetch_workdir",
    "http_request",
    "install_conda",
    "log",
    "main",
    "mount_namespace_works",
    "skypilot_env",
    "with_retries",
]
