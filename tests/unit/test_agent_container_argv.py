"""The node agent's container command lines (`image_id: docker:<image>`), exactly as it runs them."""

from __future__ import annotations

from node_agent.agent.containers import CONTAINER_HOME, Container, container_path

BINDS = [["/home/ubuntu/sky_workdir", "/root/sky_workdir"], ["/data", "/data"]]


def test_docker_run_starts_one_container_on_the_host_network_with_the_binds_and_gpus():
    box = Container("docker", "skyless-j-1-i-0", "nvcr.io/nvidia/pytorch:24.01-py3", BINDS, gpus=True)
    assert box.run_argv({"skyless-job": "j-1", "skyless-cluster": "j-1-0"}) == [
        "docker", "run", "-d", "--name", "skyless-j-1-i-0", "--network", "host", "--stop-timeout", "0",
        "--label", "skyless-cluster=j-1-0", "--label", "skyless-job=j-1",
        "--gpus", "all",
        "-v", "/home/ubuntu/sky_workdir:/root/sky_workdir", "-v", "/data:/data",
        "--entrypoint", "sleep", "nvcr.io/nvidia/pytorch:24.01-py3", "infinity",
    ]  # fmt: skip


def test_podman_asks_for_gpus_through_cdi_and_a_cpu_task_gets_none():
    gpu = Container("podman", "c", "img", [], gpus=True).run_argv({})
    assert gpu == ["podman", "run", "-d", "--name", "c", "--network", "host", "--stop-timeout", "0",
                   "--device", "nvidia.com/gpu=all", "--entrypoint", "sleep", "img", "infinity"]  # fmt: skip
    cpu = Container("docker", "c", "img", [], gpus=False).run_argv({})
    assert "--gpus" not in cpu and "--device" not in cpu


def test_the_tasks_run_options_go_between_the_agents_own_options_and_the_image():
    box = Container(
        "podman", "c", "img", BINDS[:1], gpus=False, run_options=["--shm-size=1g", "-e", "FOO=bar"]
    )
    assert box.run_argv({"skyless-job": "j-1"}) == [
        "podman", "run", "-d", "--name", "c", "--network", "host", "--stop-timeout", "0",
        "--label", "skyless-job=j-1", "-v", "/home/ubuntu/sky_workdir:/root/sky_workdir",
        "--shm-size=1g", "-e", "FOO=bar",
        "--entrypoint", "sleep", "img", "infinity",
    ]  # fmt: skip


def test_setup_and_run_exec_in_the_workdir_passing_variable_names_never_values():
    box = Container("docker", "skyless-j-1-i-0", "img", BINDS, gpus=False)
    argv = box.exec_argv("echo $MY_VAR", ["SKYPILOT_NODE_RANK", "MY_VAR"])
    assert argv == [
        "docker", "exec", "-w", "/root/sky_workdir", "-e", "MY_VAR", "-e", "SKYPILOT_NODE_RANK",
        "skyless-j-1-i-0", "bash", "--norc", "-i", "-c", "echo $MY_VAR",
    ]  # fmt: skip


def test_mount_paths_inside_the_container_put_home_at_root():
    assert CONTAINER_HOME == "/root"
    assert container_path("~/sky_workdir") == "/root/sky_workdir"
    assert container_path("~") == "/root"
    assert container_path("/data/") == "/data"
    assert container_path("checkpoints") == "/root/checkpoints"
