"""`config.docker.run_options` read as SkyPilot reads it (a string or a list, split as a shell would), with
the options that would undo the node agent's own `docker run` refused by the task file's reader, naming the
field and its line."""

from __future__ import annotations

import pytest

from shared.errors import TaskFileError
from shared.task import load_pipeline
from shared.task.container_image import container_image
from shared.task.docker_run_options import run_option_words
from shared.task.unsupported_fields import pipeline_notes

TASK = """\
name: shm
resources:
  image_id: docker:ubuntu:22.04
config:
  docker:
    run_options: {options}
run: df -h /dev/shm
"""


def test_a_list_and_a_string_give_the_words_a_shell_would_split_them_into():
    assert run_option_words(["--shm-size=1g", "-e FOO=bar"]) == ["--shm-size=1g", "-e", "FOO=bar"]
    assert run_option_words("--cap-add SYS_PTRACE -e 'MSG=a b'") == [
        "--cap-add",
        "SYS_PTRACE",
        "-e",
        "MSG=a b",
    ]
    assert run_option_words(["-e", "FOO=bar", "-it", "--privileged"]) == [
        "-e",
        "FOO=bar",
        "-it",
        "--privileged",
    ]
    assert run_option_words(["--label team=ml", "-v skyless-cache:/cache", "-eX=1"]) == [
        "--label", "team=ml", "-v", "skyless-cache:/cache", "-eX=1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        (["--name mine"], "--name cannot be given"),
        (["--name=mine"], "--name cannot be given"),
        (["--entrypoint=/bin/sh"], "--entrypoint cannot be given"),
        (["--network bridge"], "--network cannot be given"),
        (["--net=none"], "--net cannot be given"),
        (["--rm"], "--rm cannot be given"),
        (["-d"], "-d cannot be given"),
        (["-itd"], "-d cannot be given"),
        (["--detach"], "--detach cannot be given"),
        (["-a stdout"], "-a cannot be given"),
        (["--stop-timeout=30"], "--stop-timeout cannot be given"),
        (["--label", "skyless-job=job-other"], "--label skyless-job=job-other cannot be given"),
        (["--label=skyless-cluster=c"], "--label skyless-cluster=c cannot be given"),
        (["-lskyless-job=j"], "--label skyless-job=j cannot be given"),
    ],
)
def test_an_option_the_agent_sets_itself_is_refused_with_the_reason(options: list[str], refused: str):
    with pytest.raises(ValueError, match=refused) as error:
        run_option_words(options)
    assert error.value.args[0].split("cannot be given: ", 1)[1]  # says why


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (["--privileged", "ubuntu"], "'ubuntu' is not an option: docker would take it for the image"),
        (["-e"], "'-e' needs a value"),
        (["-e 'FOO=bar"], "cannot be split as a shell would"),
        ([1024], "expected a string or a list of strings"),
        ({"shm": "1g"}, "expected a string or a list of strings"),
    ],
)
def test_a_value_docker_would_misread_is_refused(value: object, problem: str):
    with pytest.raises(ValueError, match=problem):
        run_option_words(value)


def test_the_task_file_reader_refuses_them_naming_the_field_and_its_line():
    with pytest.raises(TaskFileError) as refused:
        load_pipeline(TASK.format(options="[--shm-size=1g, --network=bridge]"), filename="shm.yaml")
    error = refused.value
    assert (error.file, error.line, error.field) == ("shm.yaml", 6, "config.docker.run_options")
    assert error.message.startswith("--network cannot be given: the container shares its node's network")


def test_a_container_task_carries_them_and_no_note_says_they_are_ignored():
    pipeline = load_pipeline(TASK.format(options="[--shm-size=1g, -e FOO=bar]"))
    image = container_image(pipeline.tasks[0], cloud="aws")
    assert image is not None and image.run_options == ("--shm-size=1g", "-e", "FOO=bar")
    assert image.as_config()["run_options"] == ["--shm-size=1g", "-e", "FOO=bar"]
    assert pipeline_notes(pipeline) == []


def test_a_task_on_its_machines_own_os_is_told_they_are_not_applied():
    text = TASK.format(options="[--shm-size=1g]").replace("  image_id: docker:ubuntu:22.04\n", "  cpus: 2\n")
    notes = pipeline_notes(load_pipeline(text))
    assert notes == [
        "shm: config.docker.run_options: read, not applied: the task runs on its machine's own OS (it names "
        "no image_id: docker:...)"
    ]


def test_other_config_keys_are_still_named_as_not_applied():
    text = TASK.format(options="[--shm-size=1g]").replace(
        "config:\n", "config:\n  nvidia_gpus:\n    disable_ecc: true\n"
    )
    (note,) = pipeline_notes(load_pipeline(text))
    assert note == (
        "shm: config: read, not applied: SkyPilot's per-task config (nvidia_gpus) has no skyless equivalent"
    )
