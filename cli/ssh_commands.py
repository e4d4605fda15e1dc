"""`skyless ssh NAME [-- CMD]`: a shell on a named cluster's node, or one command there.

On the local cloud: a shell inside the node's sandbox (its home and environment), registered with the node so
that its agent reports it and autostop leaves the cluster alone. On a cloud: a key of its own
(`$SKYLESS_HOME/ssh/skyless-key`), which the API has the agents install and for which it opens port 22 to the
caller; then a `Host NAME` entry in `~/.ssh/config` (cli/ssh_config.py) and `ssh NAME`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cli.client_config import ApiKey, ApiUrl
from cli.cluster_commands import ClusterName, errors
from cli.ssh_config import write_host

KEY_NAME = "skyless-key"


def register(app: typer.Typer) -> None:
    app.command("ssh")(ssh)


def ssh(
    cluster: ClusterName,
    command: Annotated[list[str] | None, typer.Argument(help="A command to run instead of a shell.")] = None,
    rank: Annotated[int, typer.Option("--rank", min=0, help="Which node (default: the head).")] = 0,
    caller_ip: Annotated[
        str | None, typer.Option("--ip", help="Open port 22 to this address (default: as the API sees you).")
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """A shell on a cluster's node, or run one command there (`skyless ssh dev -- cat marker`)."""
    from cli.job_commands import _client

    command = (command or [])[1:] if (command or [])[:1] == ["--"] else command
    with _client(api_url, api_key) as client:
        access = client.ssh_access(cluster)
        if access.method == "ssh":
            key = _ensure_key()
            access = client.ssh_access(
                cluster, public_key=key.with_suffix(".pub").read_text(), caller_cidr=caller_ip
            )
    if access.method == "local":
        raise typer.Exit(_local_shell(str(access.provider_cluster), rank, command or []))
    node = next((n for n in access.nodes if n.rank == rank), None)
    if node is None or not node.host:
        errors.print(f"[red]error:[/red] cluster {escape(cluster)} has no reachable node of rank {rank}")
        raise typer.Exit(2)
    if access.message:
        errors.print(f"[yellow]note:[/yellow] {escape(access.message)}")
    alias = cluster if rank == 0 else f"{cluster}-worker{rank}"
    path = write_host(alias, node.host, node.user or "root", _key_path())
    errors.print(f"`ssh {alias}` works now ({path}).")
    os.execvp("ssh", ["ssh", alias, *(command or [])])


def _local_shell(provider_cluster: str, rank: int, command: list[str]) -> int:
    """A shell (or one command) inside the local node's sandbox: cwd its home, its environment. The shell
    is registered with the node, whose agent reports it, so autostop does not stop a cluster in use."""
    from cli.client_config import skyless_home
    from shared.clouds.local import LocalCloud

    cloud = LocalCloud(skyless_home())
    home = cloud.node_home(provider_cluster, rank)
    env = cloud.shell_environment(provider_cluster, rank)
    sessions = home / ".skyless" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    marker = sessions / str(os.getpid())
    marker.write_text("")
    argv = ["bash", "-c", " ".join(shlex.quote(part) for part in command)] if command else ["bash", "-i"]
    try:
        return subprocess.run(argv, cwd=home, env=env, check=False).returncode
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()


def _key_path() -> Path:
    from cli.client_config import skyless_home

    return skyless_home() / "ssh" / KEY_NAME


def _ensure_key() -> Path:
    key = _key_path()
    if not key.exists():
        key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "skyless", "-f", str(key)]
        done = subprocess.run(keygen, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors.print(f"[red]error:[/red] ssh-keygen failed: {escape(done.stderr.strip())}")
            raise typer.Exit(2)
    return key
