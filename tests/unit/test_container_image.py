"""`image_id: docker:<image>` and SkyPilot's SKYPILOT_DOCKER_* login envs, read from real task files."""

from __future__ import annotations

from pathlib import Path

from shared.task import container_notes, load_pipeline, load_pipeline_file
from shared.task.container_image import container_image, docker_image_name, image_id_for

SKYPILOT_FILES = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot" / "accepted"

PRIVATE = """\
resources:
  image_id: docker:my-image:v1
envs:
  SKYPILOT_DOCKER_USERNAME: AWS
  SKYPILOT_DOCKER_SERVER: 123.dkr.ecr.us-east-1.amazonaws.com
secrets:
  SKYPILOT_DOCKER_PASSWORD: null
run: python train.py
"""


def test_docker_image_names_the_image_after_the_prefix_and_nothing_for_machine_images():
    assert docker_image_name("docker:ubuntu:22.04") == "ubuntu:22.04"
    assert docker_image_name("ami-0123456789abcdef0") is None
    assert docker_image_name(None) is None
    by_region = {"us-east-1": "docker:a:1", "us-west-2": "docker:b:2"}
    assert docker_image_name(by_region, "us-west-2") == "b:2"
    assert docker_image_name(by_region) == "a:1"  # before a region is chosen: any entry tells


def test_a_short_private_image_gets_the_server_and_the_login_but_never_the_password():
    pipeline = load_pipeline(PRIVATE, secret_overrides={"SKYPILOT_DOCKER_PASSWORD": "s3cret-token"})
    image = container_image(pipeline.tasks[0])
    assert image is not None
    assert image.image == "123.dkr.ecr.us-east-1.amazonaws.com/my-image:v1"
    assert image.as_config() == {
        "image": "123.dkr.ecr.us-east-1.amazonaws.com/my-image:v1",
        "registry": "123.dkr.ecr.us-east-1.amazonaws.com",
        "username": "AWS",
    }
    assert "s3cret-token" not in repr(image.as_config())


def test_a_public_image_has_no_login_and_a_full_name_is_not_prefixed_twice():
    public = load_pipeline("resources:\n  image_id: docker:ubuntu:22.04\nrun: echo hi\n")
    image = container_image(public.tasks[0])
    assert image is not None and image.registry is None and image.image == "ubuntu:22.04"
    full = PRIVATE.replace("docker:my-image:v1", "docker:123.dkr.ecr.us-east-1.amazonaws.com/my-image:v1")
    named = container_image(load_pipeline(full, secret_overrides={"SKYPILOT_DOCKER_PASSWORD": "x"}).tasks[0])
    assert named is not None and named.image == "123.dkr.ecr.us-east-1.amazonaws.com/my-image:v1"


def test_a_task_on_a_machine_image_has_no_container():
    pipeline = load_pipeline("resources:\n  image_id: ami-0123456789abcdef0\nrun: echo hi\n")
    assert container_image(pipeline.tasks[0]) is None
    assert container_notes(pipeline) == []


def test_plan_notes_say_where_setup_and_run_run_and_the_registry_login():
    pipeline = load_pipeline(PRIVATE, defer_secrets=True)  # planning: the password comes at launch
    assert container_notes(pipeline) == [
        "task #1: resources.image_id: setup and run run inside the container "
        "123.dkr.ecr.us-east-1.amazonaws.com/my-image:v1 (docker or podman on each node, logged in to "
        "123.dkr.ecr.us-east-1.amazonaws.com as AWS); the workdir is /root/sky_workdir there"
    ]


def test_an_alternative_pinned_to_a_cloud_overrides_the_image_as_skypilots_gpt2_example_does_for_lambda():
    pipeline = load_pipeline_file(SKYPILOT_FILES / "gpt2_pipeline.yaml", {"BUCKET_NAME": "my-bucket"})
    train = pipeline.tasks[1]
    assert image_id_for(train.resources, "lambda") is None  # `image_id: null` in the lambda alternative
    assert image_id_for(train.resources, "aws") == "docker:nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
    assert container_image(train, cloud="lambda") is None
    on_gcp = container_image(train, cloud="gcp")
    assert on_gcp is not None and on_gcp.image == "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
