"""The task's container (`image_id: docker:...`): found runtime, paths inside it, run/exec/remove."""

from __future__ import annotations

import contextlib
import subprocess

CONTAINER_HOME = "/root"  # `~` inside a task's container, as SkyPilot's containers run as root


def container_runtime() -> str | None:
    """docker, else podman: the first that answers here (a docker client without its daemon does not)."""
    for name in ("docker", "podman"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([name, "info"], capture_output=True, timeout=60).returncode == 0:
                return name
    return None


def container_path(path: str) -> str:
    """Where a mount's path is inside the container: `~` is CONTAINER_HOME, absolute paths stay."""
    path = path.rstrip("/") or "/"
    if path == "~" or path.startswith("~/"):
        return CONTAINER_HOME + path[1:]
    return path if path.startswith("/") else f"{CONTAINER_HOME}/{path}"


class Container:
    """The node's one container (`image_id: docker:...`): started once, `setup` and `run` exec'd in it."""

    def __init__(
        self,
        runtime: str,
        name: str,
        image: str,
        binds: list[list[str]],
        gpus: bool,
        run_options: list[str] | None = None,
    ) -> None:
        self.runtime, self.name, self.image, self.binds, self.gpus = runtime, name, image, binds, gpus
        self.run_options = run_options or []  # the task's `config.docker.run_options`, checked at submit

    def run_argv(self, labels: dict[str, str]) -> list[str]:
        # --stop-timeout 0: `rm -f` kills at once (podman would wait 10 s on a PID 1 that ignores SIGTERM)
        argv = [self.runtime, "run", "-d", "--name", self.name, "--network", "host", "--stop-timeout", "0"]
        for key, value in sorted(labels.items()):
            argv += ["--label", f"{key}={value}"]
        if self.gpus:
            argv += ["--gpus", "all"] if self.runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        for host, inside in self.binds:
            argv += ["-v", f"{host}:{inside}"]
        return [*argv, *self.run_options, "--entrypoint", "sleep", self.image, "infinity"]

    @property
    def workdir(self) -> str:
        return container_path("~/sky_workdir")

    def exec_argv(self, script: str, names: list[str]) -> list[str]:
        """Values stay in the exec's environment: `-e NAME` passes them without putting them in argv.
        `bash -i`, as on the host (runner.task_script), so that ~/.bashrc is read as SkyPilot reads it."""
        argv = [self.runtime, "exec", "-w", self.workdir]
        for name in sorted(names):
            argv += ["-e", name]
        return [*argv, self.name, "bash", "--norc", "-i", "-c", script]

    def signal(self, name: str) -> None:
        """Send every process in the container but its init `name` (docker exec passes no signals on)."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.runtime, "exec", self.name, "bash", "-c", f"kill -{name} -1"],
                           capture_output=True, timeout=30)  # fmt: skip

    def remove(self) -> None:
        """In a session of its own: a node whose process group is killed meanwhile does not cut it short
        (podman would forget the container while it still runs)."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.runtime, "rm", "-f", self.name], capture_output=True, timeout=120,
                           start_new_session=True)  # fmt: skip
