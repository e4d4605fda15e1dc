"""`docker.run_options`: SkyPilot's extra `docker run` options for a task's container, checked against what
the node agent's own options rely on.

SkyPilot (sky/resources.py) reads `docker.run_options` from the task's `config:` section, else from
~/.sky/config.yaml (the task's value replaces the file's), as a string or a list of strings, and
provision/docker_utils.py joins them with spaces into its `docker run` command line ahead of its own
`--net=host` and `--entrypoint`. skyless splits them as a shell would (variables are not expanded) and the
agent puts the words between its own options and the image. Options that would undo what the agent relies
on are refused with the reason, never dropped.
"""

from __future__ import annotations

import shlex
from typing import Any

RUN_OPTIONS_PATH = ("config", "docker", "run_options")
RUN_OPTIONS_FIELD = ".".join(RUN_OPTIONS_PATH)
OWN_LABEL_PREFIX = "skyless-"  # the agent's labels (skyless-job, skyless-cluster) find a job's containers

_NETWORK = (
    "the container shares its node's network, as SkyPilot's do (--net=host): nodes reach each other there"
)
REFUSED: dict[str, str] = {
    "--name": "the agent names the container, to exec setup and run in it and remove it",
    "--entrypoint": "the agent keeps the container up with its own entrypoint and execs setup and run in it",
    "--network": _NETWORK,
    "--net": _NETWORK,
    "--rm": "the agent removes the container itself when the task ends",
    "--detach": "the agent starts the container detached already",
    "--attach": "the container runs detached: setup's and run's output is the job's log",
    "--stop-timeout": "the agent stops the container at once when the task ends",
}
_SHORT_REFUSED = {"d": "--detach", "a": "--attach"}
# docker's and podman's `run` flags that take no value: a word after one of them is no option's value
_FLAGS = frozenset({
    "--init", "--privileged", "--read-only", "--publish-all", "--oom-kill-disable", "--no-healthcheck",
    "--interactive", "--tty", "--sig-proxy", "--disable-content-trust", "--quiet", "--read-only-tmpfs",
    "--env-host", "--no-hosts", "--http-proxy", "--rootfs", "--replace", "--rmi", "--detach", "--rm",
})  # fmt: skip
_SHORT_FLAGS = frozenset("itPq")
LABEL_OPTIONS = ("--label", "-l")


def run_options_value(config: Any) -> Any:
    """`docker.run_options` as a task's `config:` (or a config file) writes it; None when it has none."""
    docker = config.get("docker") if isinstance(config, dict) else None
    return docker.get("run_options") if isinstance(docker, dict) else None


def task_run_options(task: Any) -> list[str]:
    """The words the task's container is started with (its `config.docker.run_options`, checked when the
    task was read); empty when it gives none."""
    config = getattr(task, "config", None)
    if config is not None and not isinstance(config, dict):
        config = config.model_dump(exclude_none=True)
    value = run_options_value(config)
    return [] if value is None else run_option_words(value)


def run_option_words(value: Any) -> list[str]:
    """`value` (a string or a list of strings) as the words docker gets. ValueError naming the first
    problem: a value of another type, a quote left open, an option the agent sets itself, a word docker
    would take for the image."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"expected a string or a list of strings; found {value!r}")
    try:
        words = [word for item in value for word in shlex.split(item)]
    except ValueError as error:
        raise ValueError(f"cannot be split as a shell would ({error}); found {value!r}") from None
    pending: str | None = None  # the option whose value the next word is
    for word in words:
        if pending is not None:
            if pending in LABEL_OPTIONS:
                _check_label(word)
            pending = None
            continue
        if not word.startswith("-") or word == "-":
            raise ValueError(
                f"{word!r} is not an option: docker would take it for the image (the image is "
                "resources.image_id; write a flag's value as --flag=value)"
            )
        pending = _check_option(word)
    if pending is not None:
        raise ValueError(f"{words[-1]!r} needs a value (write --flag=value for a flag that takes none)")
    return words


def _check_option(word: str) -> str | None:
    """ValueError for an option the agent sets itself; answer the option when the next word is its value."""
    if word.startswith("--"):
        name, has_value, value = word.partition("=")
        if name in REFUSED:
            _refuse(name, REFUSED[name])
        if has_value and name in LABEL_OPTIONS:
            _check_label(value)
        return None if has_value or name in _FLAGS else name
    letters = word[1:]
    for index, letter in enumerate(letters):
        if letter in _SHORT_REFUSED:
            _refuse(f"-{letter}", REFUSED[_SHORT_REFUSED[letter]])
        if letter in _SHORT_FLAGS:
            continue
        value = letters[index + 1 :].removeprefix("=")
        if value and f"-{letter}" in LABEL_OPTIONS:
            _check_label(value)
        return None if value else f"-{letter}"
    return None


def _check_label(word: str) -> None:
    if word.startswith(OWN_LABEL_PREFIX):
        _refuse(
            f"--label {word}", f"labels named {OWN_LABEL_PREFIX}* are the agent's, to find a job's containers"
        )


def _refuse(option: str, why: str) -> None:
    raise ValueError(f"{option} cannot be given: {why}")
