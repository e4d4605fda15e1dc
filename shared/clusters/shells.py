"""`skyless ssh NAME`: how to get a shell on a cluster's nodes.

- The local cloud: a shell inside the node's sandbox on this machine (its home, its environment), started by
  the CLI itself; nothing to open. No `~/.ssh/config` entry: there is no sshd, and the node is a folder.
- A cloud: the caller's public key goes into the cluster record; each agent's next poll answers it and the
  agent adds it to `~/.ssh/authorized_keys`; port 22 opens to the caller's address only (providers with
  `open_ssh`: AWS). The CLI writes a `Host <name>` entry into `~/.ssh/config`, so plain `ssh NAME` and VS Code
  Remote-SSH work too.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from shared.clusters.facts import nodes_by_rank
from shared.clusters.operations import find_cluster
from shared.clusters.states import ClusterState
from shared.config import Settings
from shared.errors import ConflictError, UserError
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

MAX_KEYS = 20
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")  # fmt: skip
LOGIN_USERS = {"aws": "ubuntu", "gcp": "skyless", "azure": "azureuser"}  # unless the provider says (run_as)


def check_public_key(key: str) -> str:
    parts = key.strip().split()
    if len(parts) < 2 or parts[0] not in KEY_TYPES or "\n" in key.strip():
        raise UserError(
            "not an OpenSSH public key (one line: '<type> <base64> [comment]')", field="public_key"
        )
    return " ".join(parts[:3])


def check_cidr(cidr: str) -> str:
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        raise UserError(f"{cidr[:60]!r} is not an address or CIDR", field="caller_cidr") from None
    if network.num_addresses > 256:
        raise UserError(
            "open port 22 to your own address (at most a /24), not to a wide range", field="caller_cidr"
        )
    return str(network)


def ssh_access(
    settings: Settings,
    *,
    owner: str,
    name: str,
    public_key: str | None = None,
    caller_cidr: str | None = None,
) -> dict[str, Any]:
    """How to reach the nodes; on a cloud, also let the caller's key and address in."""
    wiring = wiring_for(settings)
    store = ClusterStore(settings)
    cluster = find_cluster(settings, owner, name)
    if cluster.state != ClusterState.UP:
        raise ConflictError(f"cluster {name} is {cluster.state}; ssh needs it UP", field="cluster")
    nodes = nodes_by_rank(cluster)
    answer: dict[str, Any] = {
        "cluster": name,
        "cloud": cluster.cloud,
        "provider": cluster.provider,
        "provider_cluster": cluster.provider_cluster,
        "method": "local" if cluster.provider == "local" else "ssh",
        "nodes": [],
        "message": None,
    }
    if cluster.provider == "local":
        answer["nodes"] = [{"rank": int(n["rank"]), "instance_id": iid} for iid, n in nodes]
        return answer
    provider = wiring.providers.build(str(cluster.provider))
    user = getattr(getattr(provider, "config", None), "run_as", None) or LOGIN_USERS.get(
        str(cluster.cloud), "root"
    )
    answer["nodes"] = [
        {"rank": int(n["rank"]), "instance_id": iid, "host": n.get("public_ip") or n.get("ip"), "user": user}
        for iid, n in nodes
    ]
    if public_key is None:
        answer["message"] = "no public key given: nothing was installed or opened"
        return answer
    if caller_cidr is None:
        raise UserError("the caller's address is needed to open port 22 to it", field="caller_cidr")
    key, cidr = check_public_key(public_key), check_cidr(caller_cidr)
    keys = json.loads(cluster.ssh_keys) if cluster.ssh_keys else []
    cidrs = json.loads(cluster.ssh_cidrs) if cluster.ssh_cidrs else []
    changes: dict[Any, Any] = {}
    if key not in keys:
        changes["ssh_keys"] = json.dumps(([*keys, key])[-MAX_KEYS:])
    if cidr not in cidrs:
        changes["ssh_cidrs"] = json.dumps(([*cidrs, cidr])[-MAX_KEYS:])
    if changes:
        store.write_cluster(cluster, changes, check="none", message=f"ssh opened to {cidr}", kind="ssh")
    opener = getattr(provider, "open_ssh", None)
    if opener is not None:
        opener(str(cluster.provider_cluster), cidr)
    else:
        answer["message"] = (
            f"skyless's {cluster.provider} provider does not open port 22 yet: the key is installed on the "
            "nodes, but reaching them needs a firewall rule you add yourself"
        )
    return answer
