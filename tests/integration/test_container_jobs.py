"""A task with `image_id: docker:<image>` through submit and provisioning on every provider: VMs boot their
default image with docker made usable and the agent's config names the container; the registry password
travels only in the agent's authenticated config, never in user-data. Where the container cannot run (the
local cloud without docker or podman, RunPod with a private registry) the submit is refused naming the
field and line, by the API as the CLI calls it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from chalice.test import Client
from conftest import QueueDriver

from functions.provision.handler import handler as provision_handler
from functions.submit.app import app
from shared.clouds import containers
from shared.clouds.aws_images import forget_images
from shared.config import Settings
from shared.errors import NotFoundError, TaskFileError
from shared.jobs.agent_reports import agent_config
from shared.jobs.containers import node_container
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.task_records import secrets_of
from shared.jobs.views import get_job
from shared.states import JobState
from shared.store.users import create_user
from shared.task import load_pipeline
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "containers"
PASSWORD = "ecr-password-9f8e7d"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
PLACES = {"aws": "aws/us-east-1", "gcp": "gcp/us-central1", "azure": "azure/eastus", "lambda": "lambda"}


def pinned(cloud: str, name: str = "private_image.yaml") -> str:
    text = (FILES / name).read_text()
    return text.replace("  cpus: 2+\n", f"  infra: {PLACES[cloud]}\n  cpus: 2+\n")


@pytest.fixture
def clouds(
    stack: Settings, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    for fake in ("fake_gcp", "fake_azure", "fake_lambda"):
        request.getfixturevalue(fake)
    providers = "aws=aws,gcp=gcp,azure=azure,lambda=lambda"
    monkeypatch.setenv("SKYLESS_PROVIDERS", providers)
    monkeypatch.setenv("SKYLESS_AWS_REGIONS", "us-east-1")
    forget_images()
    settings = stack.with_(providers=providers, api_url="https://api.example.com")
    yield settings
    aws = wiring_for(settings).providers.build("aws")
    for cluster_id in {n.cluster_id for n in aws.list_owned()}:
        aws.terminate(cluster_id)


def boot_script(
    cloud: str, settings: Settings, request: pytest.FixtureRequest, job_id: str
) -> tuple[str, Any]:
    """(the user-data / startup script the node got, the image it boots)."""
    if cloud == "aws":
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=settings.endpoint_url)
        filters = [{"Name": "tag:skyless-job", "Values": [job_id]}]
        [instance] = [
            i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]
        ]
        raw = ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
        image = ec2.describe_images(ImageIds=[instance["ImageId"]])["Images"][0]["Name"]
        return base64.b64decode(raw["UserData"]["Value"]).decode(), image
    if cloud == "gcp":
        body = request.getfixturevalue("fake_gcp").inserts[-1]
        script = next(i["value"] for i in body["metadata"]["items"] if i["key"] == "startup-script")
        return script, body["disks"][0]["initializeParams"]["sourceImage"]
    if cloud == "azure":
        properties = request.getfixturevalue("fake_azure").vm_creates[-1]["properties"]
        custom = base64.b64decode(properties["osProfile"]["customData"]).decode()
        return custom, properties["storageProfile"]["imageReference"]
    launch = request.getfixturevalue("fake_lambda").launches[-1]
    return launch["user_data"], None


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure", "lambda"])
def test_a_private_image_boots_the_default_image_with_docker_and_the_password_only_in_the_agent_config(
    cloud: str, clouds: Settings, queues: QueueDriver, request: pytest.FixtureRequest
) -> None:
    job_id = submit_job(
        wiring_for(clouds),
        SubmitJob.from_text(
            owner="alice",
            task_text=pinned(cloud),
            filename="private_image.yaml",
            secrets={"SKYPILOT_DOCKER_PASSWORD": PASSWORD},
        ),
    ).job_id
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(clouds), job_id, owner=None)
    assert view.state == JobState.SETTING_UP, view.timeline[-1]

    script, image = boot_script(cloud, clouds, request, job_id)
    assert PASSWORD not in script and "SKYPILOT_DOCKER" not in script
    assert "apt-get install -y -qq docker.io" in script  # where the image has no docker or podman
    assert "docker:" not in json.dumps(image)  # the VM boots the cloud's own image, not the container's name
    if cloud == "aws":
        assert image.startswith("ubuntu/images/")
    if cloud in ("azure", "lambda"):
        assert "usermod -aG docker" in script  # the agent runs as the admin user, who must reach docker

    record = wiring_for(clouds).store.get(job_id)
    assert record is not None and PASSWORD not in json.dumps(record.attribute_values, default=str)
    assert view.cluster is not None
    config = agent_config(wiring_for(clouds), job_id, view.cluster["nodes"][0]["instance_id"])
    assert config is not None
    assert config.container == {"image": f"{REGISTRY}/trainer:v3", "registry": REGISTRY, "username": "AWS"}
    assert config.envs["SKYPILOT_DOCKER_PASSWORD"] == PASSWORD  # the authenticated fetch is its only way


def test_a_task_without_a_container_gets_no_docker_setup_in_user_data(
    clouds: Settings, queues: QueueDriver, request: pytest.FixtureRequest
) -> None:
    text = pinned("gcp", "public_image.yaml").replace("  image_id: docker:ubuntu:22.04\n", "")
    job_id = submit_job(wiring_for(clouds), SubmitJob.from_text(owner="alice", task_text=text)).job_id
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    script, _ = boot_script("gcp", clouds, request, job_id)
    assert "docker" not in script
    view = get_job(wiring_for(clouds), job_id, owner=None)
    assert view.cluster is not None
    config = agent_config(wiring_for(clouds), job_id, view.cluster["nodes"][0]["instance_id"])
    assert config is not None and config.container is None


def post(client: Client, key: str, body: dict[str, Any], path: str = "/jobs") -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    answer = client.http.post(path, headers=headers, body=json.dumps(body))
    return answer.status_code, answer.json_body


def test_the_local_cloud_without_docker_or_podman_refuses_the_submit_naming_field_and_line(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(containers, "local_runtime", lambda: None)
    key = create_user("containerised", stack)
    text = (FILES / "public_image.yaml").read_text()
    with Client(app) as client:
        status, error = post(client, key, {"task": text, "filename": "public_image.yaml"})

    assert status == 400
    assert (error["file"], error["line"], error["field"]) == ("public_image.yaml", 4, "resources.image_id")
    assert "neither works on this machine" in error["message"] and "docker:ubuntu:22.04" in error["message"]
    with Client(app) as client:
        body = {"task": text, "filename": "public_image.yaml", "name": "nightly", "cron": "0 3 * * *"}
        status, error = post(client, key, body, "/schedules")  # refused now, not when it fires
    assert status == 400 and (error["line"], error["field"]) == (4, "resources.image_id")


def test_the_local_cloud_with_a_runtime_accepts_it_and_its_agent_gets_the_container(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(containers, "local_runtime", lambda: "podman")
    submitted = submit_job(
        wiring_for(stack),
        SubmitJob.from_text(owner="alice", task_text=(FILES / "public_image.yaml").read_text()),
    )
    assert submitted.state == JobState.PLANNED


def test_runpod_runs_a_public_image_as_the_pod_but_refuses_a_private_registry(stack: Settings) -> None:
    settings = stack.with_(providers="*=runpod")
    text = (FILES / "private_image.yaml").read_text()
    with pytest.raises(TaskFileError) as refused:
        submit_job(
            wiring_for(settings),
            SubmitJob.from_text(
                owner="alice",
                task_text=text,
                filename="private_image.yaml",
                secrets={"SKYPILOT_DOCKER_PASSWORD": PASSWORD},
            ),
        )
    assert (refused.value.field, refused.value.line) == ("resources.image_id", 5)
    assert "runpod" in refused.value.message and PASSWORD not in str(refused.value)
    public = (FILES / "public_image.yaml").read_text()
    assert submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=public)).job_id
    task = load_pipeline(public).tasks[0]
    assert node_container(settings, task, "runpod", "US-TX-3") is None  # the agent already runs inside it
    assert node_container(stack, task, "runpod", "US-TX-3") == {"image": "ubuntu:22.04", "registry": None,
                                                                "username": None}  # fmt: skip


def test_a_password_given_with_env_as_skypilots_docs_show_is_kept_out_of_the_job_record(
    clouds: Settings,
) -> None:
    text = pinned("aws").replace("  SKYPILOT_DOCKER_PASSWORD: null\n", "  {}\n")
    job_id = submit_job(
        wiring_for(clouds),
        SubmitJob.from_text(owner="alice", task_text=text, env={"SKYPILOT_DOCKER_PASSWORD": PASSWORD}),
    ).job_id
    wiring = wiring_for(clouds)
    record = wiring.store.get(job_id)
    assert record is not None and PASSWORD not in json.dumps(record.attribute_values, default=str)
    assert secrets_of(wiring, record, 0) == {"SKYPILOT_DOCKER_PASSWORD": PASSWORD}


ANY_OF = """\
resources:
  cpus: 2+
  image_id: docker:nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04
  any_of:
    - infra: lambda
      image_id: null
    - infra: gcp
run: nvidia-smi
"""


@pytest.mark.parametrize(("cloud", "container"), [("lambda", False), ("gcp", True)])
def test_an_alternative_that_sets_image_id_null_runs_on_the_base_image_of_its_cloud(
    cloud: str, container: bool, clouds: Settings, queues: QueueDriver, request: pytest.FixtureRequest
) -> None:
    job_id = submit_job(
        wiring_for(clouds), SubmitJob.from_text(owner="alice", task_text=ANY_OF, clouds=[cloud])
    ).job_id
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(clouds), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None, view.timeline[-1]
    script, _ = boot_script(cloud, clouds, request, job_id)
    assert ("docker.io" in script) is container
    config = agent_config(wiring_for(clouds), job_id, view.cluster["nodes"][0]["instance_id"])
    assert config is not None
    expected = {"image": "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", "registry": None, "username": None}
    assert config.container == (expected if container else None)


OPTIONS = "config:\n  docker:\n    run_options: [--shm-size=1g, -e FOO=bar]\n"


def test_run_options_reach_the_agent_config_of_the_jobs_own_nodes_only_and_never_user_data(
    clouds: Settings, queues: QueueDriver, request: pytest.FixtureRequest
) -> None:
    public = pinned("gcp", "public_image.yaml")
    wiring = wiring_for(clouds)
    alice = submit_job(wiring, SubmitJob.from_text(owner="alice", task_text=public + OPTIONS)).job_id
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    script, _ = boot_script("gcp", clouds, request, alice)
    bob = submit_job(wiring, SubmitJob.from_text(owner="bob", task_text=public)).job_id
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}

    assert (
        "shm-size" not in script and "FOO=bar" not in script
    )  # only the authenticated config fetch has them
    configs = {}
    for job_id in (alice, bob):
        view = get_job(wiring, job_id, owner=None)
        assert view.cluster is not None, view.timeline[-1]
        configs[job_id] = agent_config(wiring, job_id, view.cluster["nodes"][0]["instance_id"])
    assert configs[alice] is not None and configs[bob] is not None
    assert configs[alice].container == {
        "image": "ubuntu:22.04", "registry": None, "username": None,
        "run_options": ["--shm-size=1g", "-e", "FOO=bar"],
    }  # fmt: skip
    assert configs[bob].container == {"image": "ubuntu:22.04", "registry": None, "username": None}
    alice_node = get_job(wiring, alice, owner=None).cluster["nodes"][0]["instance_id"]  # type: ignore[index]
    with pytest.raises(NotFoundError):  # a node gets its own job's config, nobody else's
        agent_config(wiring, bob, alice_node)


def test_runpod_refuses_run_options_naming_the_field_and_line(stack: Settings) -> None:
    settings = stack.with_(providers="*=runpod")
    text = (FILES / "public_image.yaml").read_text() + OPTIONS
    with pytest.raises(TaskFileError) as refused:
        submit_job(
            wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=text, filename="t.yaml")
        )
    error = refused.value
    assert (error.file, error.line, error.field) == ("t.yaml", 8, "config.docker.run_options")
    assert "the runpod provider runs the image as the pod" in error.message


def test_the_api_refuses_an_option_the_agent_sets_itself_naming_the_field_and_line(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(containers, "local_runtime", lambda: "podman")
    key = create_user("optioned", stack)
    text = (FILES / "public_image.yaml").read_text() + OPTIONS.replace("-e FOO=bar", "--name other")
    with Client(app) as client:
        status, error = post(client, key, {"task": text, "filename": "public_image.yaml"})
    assert status == 400
    assert (error["file"], error["line"], error["field"]) == (
        "public_image.yaml",
        8,
        "config.docker.run_options",
    )
    assert error["message"].startswith("--name cannot be given: the agent names the container")
