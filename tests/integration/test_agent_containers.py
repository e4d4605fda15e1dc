"""The node agent running `setup` and `run` inside the task's container (`image_id: docker:<image>`), as a
real process against the agent protocol server of test_agent.py.

Two runtimes: a stand-in `docker` on PATH that records every command line (and plays the container by
running the exec'd command in the bound host folder), and, where this machine can run containers,
real podman with an image built here from the host's own binaries (no registry is reachable in tests)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_agent import AgentProtocolServer, _config, _shipped_log, _start_agent
from test_agent import bucket as bucket  # the fixture

FAKE_DOCKER = r"""#!PYTHON
import json, os, sys
state = os.environ["FAKE_DOCKER_STATE"]
args = sys.argv[1:]
stdin = sys.stdin.read() if args[:1] == ["login"] else None
with open(os.path.join(state, "calls.jsonl"), "a") as calls:
    calls.write(json.dumps({"argv": ["docker", *args], "stdin": stdin}) + "\n")
if args[0] == "info":
    sys.exit(int(os.environ.get("FAKE_DOCKER_INFO_EXIT", "0")))
if args[0] == "login":
    os.makedirs(os.environ["DOCKER_CONFIG"], exist_ok=True)
    with open(os.path.join(os.environ["DOCKER_CONFIG"], "config.json"), "w") as f:
        f.write("{}")
if args[0] == "run":
    binds = {}
    for i, arg in enumerate(args):
        if arg == "-v":
            host, inside = args[i + 1].split(":", 1)
            binds[inside] = host
    with open(os.path.join(state, "binds.json"), "w") as f:
        json.dump(binds, f)
    print("c0ffee")
if args[0] == "exec":
    i, cwd, names = 1, None, []
    while args[i].startswith("-"):
        if args[i] == "-w":
            cwd = args[i + 1]
        else:
            names.append(args[i + 1])
        i += 2
    command = args[i + 1:]
    if command[-1].startswith("kill -"):
        sys.exit(0)  # a signal to the container's processes: the agent's own group signal reaches them here
    binds = json.load(open(os.path.join(state, "binds.json")))
    os.chdir(binds.get(cwd, cwd))
    env = {"PATH": os.environ["PATH"], **{n: os.environ[n] for n in names if n in os.environ}}
    os.execvpe(command[0], command, env)
"""


def _fake_docker(folder: Path, python: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "docker"
    script.write_text(FAKE_DOCKER.replace("PYTHON", python, 1))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (folder / "state").mkdir(exist_ok=True)
    return folder


def _calls(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "state" / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _container_config(s3: Any, bucket: str, job: str, **overrides: Any) -> dict[str, Any]:
    config = _config(
        s3, bucket, job, setup="echo setup-in=$PWD", run='echo "run var=$MY_VAR rank=$SKYPILOT_NODE_RANK"'
    )
    config["envs"]["SKYPILOT_DOCKER_PASSWORD"] = "pw-secret-123"
    config["container"] = {"image": "registry.example.com/team/train:1", "registry": "registry.example.com",
                           "username": "bot"}  # fmt: skip
    config.update(overrides)
    return config


def test_agent_logs_in_with_the_password_on_stdin_starts_the_container_and_execs_both_stages(
    bucket: tuple[Any, str], tmp_path: Path
):
    import sys

    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    fake = _fake_docker(tmp_path / "bin", sys.executable)
    home = tmp_path / "node"
    with AgentProtocolServer(_container_config(s3, name, job)) as api:
        agent = _start_agent(
            api.url, job, home,
            PATH=f"{fake}:{os.environ['PATH']}", FAKE_DOCKER_STATE=str(fake / "state"),
            SKYLESS_CLOUD="aws", SKYLESS_AWS_METADATA_URL=api.url,
        )  # fmt: skip
        _out, err = agent.communicate(timeout=60)

    assert agent.returncode == 0, err.decode()
    assert api.phases() == ["setting_up", "running", "succeeded"]
    calls = _calls(fake)
    verbs = [c["argv"][1] for c in calls]
    assert verbs == ["info", "rm", "login", "run", "exec", "exec", "rm"]
    login = calls[2]
    assert login["argv"] == [
        "docker",
        "login",
        "--username",
        "bot",
        "--password-stdin",
        "registry.example.com",
    ]
    assert login["stdin"] == "pw-secret-123"
    assert all("pw-secret-123" not in " ".join(c["argv"]) for c in calls)  # never on a command line
    name_ = f"skyless-{job}-i-rank1"
    assert calls[3]["argv"] == [
        "docker", "run", "-d", "--name", name_, "--network", "host", "--stop-timeout", "0",
        "--label", f"skyless-cluster=c-{job}", "--label", f"skyless-job={job}",
        "--gpus", "all",  # the config's gpus_per_node is 8, on a VM
        "-v", f"{home}/sky_workdir:/root/sky_workdir",
        "-v", f"{home}/mounted/file.txt:/root/mounted/file.txt",
        "--entrypoint", "sleep", "registry.example.com/team/train:1", "infinity",
    ]  # fmt: skip
    setup, run = calls[4]["argv"], calls[5]["argv"]
    assert setup[:4] == ["docker", "exec", "-w", "/root/sky_workdir"]
    assert setup[-6:-1] == [name_, "bash", "--norc", "-i", "-c"]  # SkyPilot's wrapper, as on the host
    assert "source ~/.bashrc\n" in setup[-1] and setup[-1].endswith(
        "cd /root/sky_workdir\necho setup-in=$PWD\n"
    )
    assert "-e" in setup and "SKYPILOT_SETUP_NODE_RANK" in setup and "SKYPILOT_NODE_RANK" not in setup
    assert "MY_VAR" in run and "SKYPILOT_NODE_RANK" in run and "hello world" not in run
    assert "PATH" not in run and "HOME" not in run  # the host's own environment stays outside
    assert calls[6]["argv"] == ["docker", "rm", "-f", name_]  # gone when the task ends
    assert not (home / ".skyless-registry").exists()  # the login is forgotten once the image is pulled

    logs = _shipped_log(s3, name, f"runs/{job}/logs/1/")
    assert f"setup-in={home}/sky_workdir" in logs  # the stand-in runs it in the bound folder
    assert "run var=hello world rank=1" in logs
    assert "pw-secret-123" not in logs


def test_no_working_runtime_on_the_node_fails_the_job_saying_so(bucket: tuple[Any, str], tmp_path: Path):
    import sys

    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    fake = _fake_docker(tmp_path / "bin", sys.executable)  # a docker client whose daemon does not answer
    with AgentProtocolServer(_container_config(s3, name, job)) as api:
        agent = _start_agent(api.url, job, tmp_path / "node", PATH=str(fake),
                             FAKE_DOCKER_STATE=str(fake / "state"), FAKE_DOCKER_INFO_EXIT="1")  # fmt: skip
        _out, err = agent.communicate(timeout=60)

    assert api.phases() == ["setting_up", "failed"], err.decode()
    assert "no container runtime (docker or podman) works on this node" in api.statuses[-1]["message"]
    assert [c["argv"][1] for c in _calls(fake)] == ["info"]  # podman is not on this PATH either


# -- real podman, where this machine can run a container -------------------------------------------------

PODMAN_CONF = '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n'


def _rootfs_image(folder: Path, env: dict[str, str]) -> str:
    """An image of the host's bash, coreutils it needs and their libraries, with a marker file."""
    root = folder / "rootfs"
    for tool in ("bash", "sleep", "cat", "env", "ls"):
        path = Path(shutil.which(tool) or "")
        if not path.is_file():
            continue
        for needed in [path, *_libraries(path)]:
            target = root / str(needed).lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(needed, target)
    (root / "bin").mkdir(exist_ok=True)
    if not (root / "bin" / "bash").exists():
        (root / "bin" / "bash").symlink_to(shutil.which("bash") or "/usr/bin/bash")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "skyless-probe").write_text("inside-the-image\n")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")  # as every real image has
    (root / "root").mkdir(exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    tar = folder / "rootfs.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
    image = f"localhost/skyless-test-{uuid.uuid4().hex[:6]}:1"
    subprocess.run(
        ["podman", "import", str(tar), image], check=True, capture_output=True, env=env, timeout=120
    )
    return image


def _libraries(binary: Path) -> list[Path]:
    listed = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    return [Path(word) for word in listed.split() if word.startswith("/")]


@pytest.fixture
def podman(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """(the environment podman works in here, an image it has), or a skip saying why not."""
    if shutil.which("podman") is None or shutil.which("ldd") is None:
        pytest.skip("no podman on this machine: real container runs are not tried")
    conf = tmp_path / "containers.conf"
    conf.write_text(PODMAN_CONF)
    try:
        image = _rootfs_image(tmp_path / "image", dict(os.environ))
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"podman cannot make an image on this machine: {error}")
    last = ""
    try:
        for extra in (
            {},
            {"CONTAINERS_CONF": str(conf)},
        ):  # as installed; then without rlimits crun can't set
            probe = subprocess.run(
                ["podman", "run", "--rm", "--network", "host", image, "cat", "/etc/skyless-probe"],
                capture_output=True, text=True, env={**os.environ, **extra}, timeout=120,
            )  # fmt: skip
            if probe.returncode == 0:
                yield extra, image
                return
            last = probe.stderr.strip()[-200:]
        pytest.skip(f"podman cannot run a container on this machine: {last}")
    finally:
        subprocess.run(["podman", "rmi", "-f", image], capture_output=True, timeout=120)


def test_setup_and_run_run_inside_a_real_podman_container(
    bucket: tuple[Any, str], tmp_path: Path, podman: tuple[dict[str, str], str]
):
    extra, image = podman
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    config = _config(
        s3, name, job,
        setup="echo setup > /root/setup-was-here",
        run='cat /etc/skyless-probe; test -f /root/setup-was-here && echo setup-kept\n'
            'echo "pwd=$PWD var=$MY_VAR"\n'
            'echo "data=$(cat data/input.txt) mount=$(cat ~/mounted/file.txt) rank=$SKYPILOT_NODE_RANK"\n'
            'echo "token=${SKYLESS_BOOT_TOKEN:-absent}"',
    )  # fmt: skip
    config["container"] = {"image": image, "registry": None, "username": None}
    home = tmp_path / "node"
    with AgentProtocolServer(config) as api:
        agent = _start_agent(api.url, job, home, **extra)  # the local cloud's agent: SKYLESS_CLOUD unset
        _out, err = agent.communicate(timeout=180)

    logs = _shipped_log(s3, name, f"runs/{job}/logs/1/")
    assert api.phases() == ["setting_up", "running", "succeeded"], (api.statuses[-1], logs, err.decode())
    assert "inside-the-image" in logs  # the image's own file system
    assert "setup-kept" in logs  # one container per node: what setup leaves, run finds
    assert "pwd=/root/sky_workdir var=hello world" in logs
    assert "data=42 mount=mounted-content rank=1" in logs
    assert "token=absent" in logs
    left = subprocess.run(["podman", "ps", "-aq", "--filter", f"label=skyless-job={job}"],
                          capture_output=True, text=True, env={**os.environ, **extra})  # fmt: skip
    assert left.stdout.strip() == ""  # removed when the task ended
