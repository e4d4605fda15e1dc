"""The node's task runner runs `setup` and `run` as SkyPilot's node does (sky/skylet/log_lib.py:
make_task_bash_script, run_bash_command_with_log): real bash, a home of its own, the output as it is cut."""

from __future__ import annotations

import io
import os
from pathlib import Path

from node_agent.agent.runner import TaskRunner, output_pieces


class Collected:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


def _run(home: Path, script: str, task_env: dict[str, str] | None = None) -> tuple[int, str]:
    workdir = home / "sky_workdir"
    workdir.mkdir(parents=True, exist_ok=True)
    shipped = Collected()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **(task_env or {})}
    code = TaskRunner(shipped).run(script, workdir, env, task_env)  # type: ignore[arg-type]
    return code, shipped.data.decode()


def test_a_variable_setup_appends_to_bashrc_is_set_in_run(tmp_path: Path) -> None:
    # Ubuntu's ~/.bashrc starts so: without SkyPilot's `bash -i`, nothing after this line would count.
    (tmp_path / ".bashrc").write_text("case $- in *i*) ;; *) return;; esac\n")
    code, _ = _run(tmp_path, "echo 'export TEST_VAR=from-setup' >> ~/.bashrc")
    assert code == 0
    code, out = _run(tmp_path, 'echo "TEST_VAR=${TEST_VAR:?is not set}"')
    assert (code, out) == (0, "TEST_VAR=from-setup\n")


def test_the_script_runs_in_the_workdir_unbuffered_without_set_e_and_exits_with_its_last_code(
    tmp_path: Path,
) -> None:
    code, out = _run(tmp_path, 'false\necho "$PWD $PYTHONUNBUFFERED"\nexit 7')
    assert code == 7
    assert out == f"{tmp_path / 'sky_workdir'} 1\n"  # `bash -i`'s job-control noise is not in the log


def test_the_tasks_variables_win_over_bashrc_and_reach_the_script_quoted(tmp_path: Path) -> None:
    (tmp_path / ".bashrc").write_text("export MODEL=from-bashrc\n")
    code, out = _run(tmp_path, 'echo "$MODEL|$ODD"', {"MODEL": "from-task", "ODD": "a 'b' $c"})
    assert (code, out) == (0, "from-task|a 'b' $c\n")


def test_a_home_without_bashrc_gets_an_empty_one_as_a_fresh_vm_user_has(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "echo ok")
    assert (code, out) == (0, "ok\n") and (tmp_path / ".bashrc").read_text() == ""


def test_output_is_cut_at_each_carriage_return_as_skypilot_prints_progress_bars() -> None:
    data = b"bash: no job control in this shell\n 10%|#\r 50%|#####\r100%|##########\r\ndone\nlast"
    pieces = list(output_pieces(io.BytesIO(data)))
    assert pieces == [b" 10%|#\r", b" 50%|#####\r", b"100%|##########\r\n", b"done\n", b"last"]


def _tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"#!/bin/bash\n{body}\n")
    (folder / name).chmod(0o755)


def test_a_vm_with_conda_is_only_initialised_as_skypilots_runtime_does(tmp_path: Path) -> None:
    from node_agent.agent.runner import install_conda

    tools = tmp_path / "bin"
    _tool(
        tools,
        "conda",
        'echo "conda $*" >> ~/calls; [ "$1" = init ] && echo "# >>> conda initialize >>>" >> ~/.bashrc',
    )
    _tool(tools, "curl", "echo curl >> ~/calls; exit 6")
    (tmp_path / ".bashrc").write_text("")
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)}
    assert install_conda(env) is None and install_conda(env) is None
    assert (tmp_path / "calls").read_text() == "conda init\n"  # once; no download where conda is


def test_a_vm_without_conda_downloads_miniconda_and_a_failure_is_said(tmp_path: Path) -> None:
    from node_agent.agent.runner import install_conda

    tools = tmp_path / "bin"
    _tool(tools, "curl", "echo \"curl $*\" >> ~/calls; echo 'could not resolve host' >&2; exit 6")
    (tmp_path / ".bashrc").write_text("")
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)}
    problem = install_conda(env)
    assert problem is not None and problem.startswith("installing Miniconda failed")
    assert "repo.anaconda.com/miniconda/Miniconda3-py310_23.11.0-2-Linux-" in (tmp_path / "calls").read_text()


def test_a_terminate_while_bashrc_is_read_ends_the_script_at_once(tmp_path: Path) -> None:
    import threading
    import time

    (tmp_path / ".bashrc").write_text("sleep 30\n")
    (tmp_path / "sky_workdir").mkdir()
    runner = TaskRunner(Collected())  # type: ignore[arg-type]
    runner.shares_agent_group = False
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    threading.Timer(1.0, runner.terminate).start()
    started = time.monotonic()
    code = runner.run("echo never", tmp_path / "sky_workdir", env, {})
    assert code == 143 and time.monotonic() - started < 10
    assert runner.started.is_set()  # the wrapper had its trap: SIGTERM, not a kill
