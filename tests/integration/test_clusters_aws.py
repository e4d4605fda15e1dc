"""Named clusters on AWS, against moto over HTTP: stop keeps the instances (and their EBS disks) and start
brings them back, the reaper leaves a stopped cluster alone, spot clusters refuse to stop as SkyPilot says,
and `skyless ssh` lets the caller's key in and opens port 22 to the caller only, then writes ~/.ssh/config.

(moto runs no user-data, so no agent runs on these instances: what a real VM's agent does with the key,
and real SSH to it, cannot be tried here.)"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import QueueDriver
from test_aws_provider import instances_of, make_spec

from functions.provision.handler import handler as provision_handler
from shared.clouds.aws import AwsCloud
from shared.clouds.aws_images import forget_images
from shared.clusters import operations, shells
from shared.clusters.agents import poll_cluster
from shared.config import Settings
from shared.errors import UserError
from shared.jobs.reaper import reap_orphans
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

TASK = """
name: box
resources:
  cloud: aws
  region: us-east-1
  cpus: 2+
run: echo hi
"""
OWNER = "u-ada"
SKYLESS = Path(sys.executable).with_name("skyless")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDm1pFGsGNVMhO6+ZVGjvo3wGgTDN5eF7O1pI3ZGW1tw ada@laptop"


@pytest.fixture
def aws_stack(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    settings = stack.with_(providers="aws=aws,*=local")
    monkeypatch.setenv("SKYLESS_PROVIDERS", settings.providers)
    monkeypatch.setenv("SKYLESS_AWS_REGIONS", "us-east-1")
    forget_images()
    yield settings
    cloud = wiring_for(settings).providers.build("aws")
    for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
        cloud.terminate(cluster_id)


def deliver(queues: QueueDriver) -> list[str]:
    records = queues.receive("provision")
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"])["action"] for r in records]


def up(settings: Settings, queues: QueueDriver, task: str = TASK) -> Any:
    operations.launch_on_cluster(settings, owner=OWNER, name="box", task_text=task)
    assert deliver(queues) == ["launch"]
    cluster = ClusterStore(settings).by_name(OWNER, "box")
    assert cluster.state == "UP" and cluster.provider == "aws"
    return cluster


def states(moto_endpoint: str, cluster_id: str) -> list[str]:
    return [i["State"]["Name"] for i in instances_of(moto_endpoint, cluster_id)]


def test_the_provider_stops_and_starts_a_clusters_instances_and_boots_the_agent_each_time(
    moto_endpoint: str,
) -> None:
    from shared.clouds.aws import AwsConfig

    forget_images()
    cloud = AwsCloud(AwsConfig(regions=("us-east-1",), endpoint_url=moto_endpoint))
    env = {"SKYLESS_API_URL": "https://api", "SKYLESS_AGENT_TOKEN": "t", "SKYLESS_AGENT_MODE": "cluster",
           "SKYLESS_CLUSTER_KEY": "cl-0123456789ab"}  # fmt: skip
    spec = make_spec(job_id="cl-0123456789ab", num_nodes=2, agent_env=env)
    try:
        nodes = cloud.launch(spec)
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
        raw = ec2.describe_instance_attribute(InstanceId=nodes[0].instance_id, Attribute="userData")
        import base64

        script = base64.b64decode(raw["UserData"]["Value"]).decode()
        assert "export SKYLESS_AGENT_MODE=cluster" in script and "per-boot" in script
        cloud.stop(spec.cluster_id)
        cloud.stop(spec.cluster_id)  # twice: nothing more
        assert set(states(moto_endpoint, spec.cluster_id)) <= {"stopping", "stopped"}
        assert {n.state for n in cloud.describe(spec.cluster_id)} == {"stopped"}
        started = cloud.start(spec.cluster_id, {})
        assert [n.instance_id for n in started] == [n.instance_id for n in nodes]  # the same VMs
        assert {n.state for n in cloud.describe(spec.cluster_id)} == {"running"}
        assert cloud.start(spec.cluster_id, {}) == started  # a second start changes nothing
    finally:
        cloud.terminate(spec.cluster_id)


def test_a_cluster_on_aws_stops_is_left_by_the_reaper_and_starts_again(
    aws_stack: Settings, queues: QueueDriver, moto_endpoint: str
) -> None:
    cluster = up(aws_stack, queues)
    operations.stop_cluster(aws_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["stop"]
    assert ClusterStore(aws_stack).by_name(OWNER, "box").state == "STOPPED"
    assert set(states(moto_endpoint, cluster.provider_cluster)) <= {"stopping", "stopped"}
    swept = reap_orphans(wiring_for(aws_stack), grace_seconds=0)
    assert cluster.provider_cluster in swept.owned and swept.killed == []
    operations.start_cluster(aws_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["start"]
    assert ClusterStore(aws_stack).by_name(OWNER, "box").state == "UP"
    assert states(moto_endpoint, cluster.provider_cluster) == ["running"]
    operations.down_cluster(aws_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["down"]
    assert states(moto_endpoint, cluster.provider_cluster) == []


def test_a_spot_cluster_on_aws_cannot_stop_but_can_autostop_down(
    aws_stack: Settings, queues: QueueDriver
) -> None:
    up(aws_stack, queues, TASK.replace("cpus: 2+", "cpus: 2+\n  use_spot: true"))
    with pytest.raises(UserError, match="stopping spot instances is not supported on AWS"):
        operations.stop_cluster(aws_stack, owner=OWNER, name="box")
    with pytest.raises(UserError, match="autostop would stop the cluster"):
        operations.launch_on_cluster(aws_stack, owner=OWNER, name="other", task_text=TASK.replace(
            "cpus: 2+", "cpus: 2+\n  use_spot: true\n  autostop: 10"))  # fmt: skip
    assert operations.set_autostop(
        aws_stack, owner=OWNER, name="box", idle_minutes=10, down=True
    ).autostop_down


def test_ssh_installs_the_key_through_the_agents_and_opens_port_22_to_the_caller_only(
    aws_stack: Settings, queues: QueueDriver, moto_endpoint: str
) -> None:
    cluster = up(aws_stack, queues)
    with pytest.raises(UserError, match="not an OpenSSH public key"):
        shells.ssh_access(aws_stack, owner=OWNER, name="box", public_key="hello", caller_cidr="1.2.3.4")
    with pytest.raises(UserError, match="at most a /24"):
        shells.ssh_access(aws_stack, owner=OWNER, name="box", public_key=KEY, caller_cidr="0.0.0.0/0")
    access = shells.ssh_access(aws_stack, owner=OWNER, name="box", public_key=KEY, caller_cidr="203.0.113.7")
    assert access["method"] == "ssh" and access["nodes"][0]["user"] == "ubuntu" and access["nodes"][0]["host"]
    again = shells.ssh_access(aws_stack, owner=OWNER, name="box", public_key=KEY, caller_cidr="203.0.113.7")
    assert again["nodes"] == access["nodes"]  # a second call: the same, nothing added twice
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    named = [{"Name": "group-name", "Values": [f"skyless-{cluster.provider_cluster}"]}]
    group = ec2.describe_security_groups(Filters=named)
    rules = [p for p in group["SecurityGroups"][0]["IpPermissions"] if p.get("FromPort") == 22]
    assert [[r["CidrIp"] for r in p["IpRanges"]] for p in rules] == [["203.0.113.7/32"]]
    # The agents learn the key at their next poll (and add it to ~/.ssh/authorized_keys).
    node = next(iter(cluster.nodes.as_dict()))
    answer = poll_cluster(aws_stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    assert answer.ssh_keys == [KEY]


def test_skyless_ssh_writes_an_ssh_config_entry_and_runs_ssh_with_it(
    aws_stack: Settings, queues: QueueDriver, tmp_path: Path
) -> None:
    from functions.submit.app import app
    from local_runtime.api_server import ApiServer
    from shared.store.users import create_user

    up(aws_stack, queues)
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_ssh = bin_dir / "ssh"
    fake_ssh.write_text('#!/bin/sh\necho "ssh $*"\ncat "$HOME/.ssh/config"\n')
    fake_ssh.chmod(fake_ssh.stat().st_mode | stat.S_IEXEC)
    key = create_user("ada", aws_stack, user_id=OWNER)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ApiServer(app, "127.0.0.1", port)
    server.start()
    try:
        env = {**os.environ, "HOME": str(home), "SKYLESS_HOME": str(home / ".skyless"),
               "PATH": f"{bin_dir}:{os.environ['PATH']}"}  # fmt: skip
        args = [
            "ssh",
            "box",
            "--ip",
            "198.51.100.4",
            "--api-url",
            server.url,
            "--api-key",
            key,
            "--",
            "uptime",
        ]
        done = subprocess.run([str(SKYLESS), *args], env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ssh box uptime\n")
    assert "# >>> skyless cluster box >>>\nHost box\n" in done.stdout and "User ubuntu" in done.stdout
    assert (home / ".skyless" / "ssh" / "skyless-key").exists()
    assert oct((home / ".ssh" / "config").stat().st_mode & 0o777) == "0o600"
    stored = ClusterStore(aws_stack).by_name(OWNER, "box")
    assert json.loads(stored.ssh_cidrs) == ["198.51.100.4/32"]
    assert json.loads(stored.ssh_keys)[0].startswith("ssh-ed25519 ")
