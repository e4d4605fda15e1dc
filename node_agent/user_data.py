"""The cloud-init user-data that starts the node agent on a VM (issue 5's providers call this)."""

from __future__ import annotations

import base64
import gzip
import shlex
from pathlib import Path

AGENT_SOURCE = Path(__file__).with_name("agent.py")

# How a VM learns its own instance id and private IP, per cloud (the agent needs both in its env).
_IDENTITY = {
    "aws": (
        'TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token '
        '-H "X-aws-ec2-metadata-token-ttl-seconds: 300")\n'
        'MD() { curl -s -H "X-aws-ec2-metadata-token: $TOKEN" '
        '"http://169.254.169.254/latest/meta-data/$1"; }\n'
        'INSTANCE_ID=$(MD instance-id)\nNODE_IP=$(MD local-ipv4)\n'
    ),
    "gcp": (
        'MD() { curl -s -H "Metadata-Flavor: Google" '
        '"http://metadata.google.internal/computeMetadata/v1/instance/$1"; }\n'
        'INSTANCE_ID=$(MD name)\nNODE_IP=$(MD network-interfaces/0/ip)\n'
    ),
    "azure": (
        'MD() { curl -s -H "Metadata: true" '
        '"http://169.254.169.254/metadata/instance/$1?api-version=2021-02-01&format=text"; }\n'
        'INSTANCE_ID=$(MD compute/name)\n'
        'NODE_IP=$(MD network/interface/0/ipv4/ipAddress/0/privateIpAddress)\n'
    ),
}
PER_BOOT = 'B=/var/lib/cloud/scripts/per-boot; [ -d $B ] && cp "$0" $B/skyless-agent.sh\n'
_FALLBACK_IDENTITY = 'INSTANCE_ID=$(hostname)\nNODE_IP=$(hostname -I | cut -d" " -f1)\n'


def render_user_data(
    *,
    api_url: str,
    job_id: str,
    cluster_id: str,
    agent_token: str,
    cloud: str,
    run_as: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> str:
    """A bash user-data script: unpack the agent, learn this VM's id and IP, start the agent detached.

    The agent file travels gzipped and base64-encoded, which keeps the script under EC2's 16 KB limit.
    The agent runs in its own session (setsid) from the user's home, so ~/sky_workdir is where SkyPilot
    puts it and stopping the agent's process group stops the task with it.

    `extra_env` (SKYLESS_AGENT_MODE=cluster, SKYLESS_CLUSTER_KEY) makes a named cluster's agent. Its node
    may be stopped and started, and cloud-init runs user-data once per instance: the script copies itself
    to cloud-init's per-boot folder, so the agent comes back at every boot.
    """
    packed = base64.b64encode(gzip.compress(AGENT_SOURCE.read_bytes(), mtime=0)).decode()
    home = f"/home/{run_as}" if run_as else "/root"
    env = {
        "SKYLESS_API_URL": api_url,
        "SKYLESS_JOB_ID": job_id,
        "SKYLESS_CLUSTER_ID": cluster_id,
        "SKYLESS_AGENT_TOKEN": agent_token,
        "SKYLESS_CLOUD": cloud,
        **(extra_env or {}),
    }
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    launch = "setsid python3 /opt/skyless/agent.py >> /var/log/skyless-agent.log 2>&1 < /dev/null &"
    if run_as:
        launch = (
            f"chown {shlex.quote(run_as)} /var/log/skyless-agent.log\n"
            f"sudo -E -H -u {shlex.quote(run_as)} {launch}"
        )
    return (
        "#!/bin/bash\n"
        "set -eu\n"
        "mkdir -p /opt/skyless\n"
        f"echo {packed} | base64 -d | gunzip > /opt/skyless/agent.py\n"
        + _IDENTITY.get(cloud, _FALLBACK_IDENTITY)
        + exports
        + "export SKYLESS_INSTANCE_ID=\"$INSTANCE_ID\" SKYLESS_NODE_IP=\"$NODE_IP\"\n"
        + "touch /var/log/skyless-agent.log\n"
        + (PER_BOOT if env.get("SKYLESS_AGENT_MODE") == "cluster" else "")
        + f"cd {home}\n"
        + launch
        + "\n"
    )
