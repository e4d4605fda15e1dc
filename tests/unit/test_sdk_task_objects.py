"""`skyless.Task` and `skyless.Resources` built as `sky.Task`/`sky.Resources` are, from YAML and in code:
what they hold, what they submit, and mistakes raised naming the field before anything is sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import skyless
from skyless.results import ClusterHandle, ClusterStatus, LaunchResult

ROOT = Path(__file__).resolve().parents[2]


def test_resources_in_code_read_back_as_sky_resources_do() -> None:
    r = skyless.Resources(infra="aws/us-east-1", accelerators="A100:8", use_spot=True, cpus="8+")
    assert (r.cloud, r.region, r.zone) == ("aws", "us-east-1", None)
    assert r.accelerators == {"A100": 8.0} and r.use_spot and r.cpus == "8+"
    assert skyless.Resources(accelerators={"H100": 4}).accelerators == {"H100": 4.0}
    assert skyless.Resources(skyless.AWS(), "p3.2xlarge").to_yaml_config() == {
        "cloud": "aws", "instance_type": "p3.2xlarge"
    }  # fmt: skip
    assert skyless.Resources(cloud="gcp") == skyless.Resources(cloud=skyless.GCP())
    assert len({skyless.Resources(cloud="gcp"), skyless.Resources(cloud="gcp")}) == 1
    assert r.copy(use_spot=None, region=None).to_yaml_config() == {
        "infra": "aws/us-east-1", "accelerators": "A100:8", "cpus": "8+"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: skyless.Resources(accelerators="A100:lots"), "resources.accelerators"),
        (lambda: skyless.Resources(cloud="awz"), "resources.cloud"),
        (lambda: skyless.Resources(cpus="many"), "resources.cpus"),
        (lambda: skyless.Resources().copy(gpu="A100"), "resources.gpu"),
        (lambda: skyless.Task(run="x", num_nodes=0), "num_nodes"),
        (lambda: skyless.Task(run=lambda rank, ips: "x"), "run"),
        (lambda: skyless.Task(run="x", envs={"1BAD": "v"}), "envs"),
        (lambda: skyless.Task(run="x").set_resources([1]), "resources"),
    ],
)
def test_mistakes_raise_a_user_error_naming_the_field(make, field: str) -> None:
    with pytest.raises(skyless.UserError) as caught:
        make()
    assert caught.value.field is not None and caught.value.field.startswith(field), caught.value
    assert caught.value.line is None  # no line of YAML the user never wrote


def test_a_task_in_code_submits_the_yaml_a_task_file_would_hold(tmp_path: Path) -> None:
    task = skyless.Task(name="train", setup="pip install x", run="python train.py", workdir=tmp_path,
                        envs={"EPOCHS": 3}, num_nodes=2)  # fmt: skip
    task.set_resources({skyless.Resources(accelerators="A100:8"), skyless.Resources(accelerators="H100:8")})
    config = yaml.safe_load(task.to_yaml())
    assert config["envs"] == {"EPOCHS": "3"} and config["num_nodes"] == 2
    assert sorted(a["accelerators"] for a in config["resources"]["any_of"]) == ["A100:8", "H100:8"]
    assert isinstance(task.resources, set) and len(task.resources) == 2
    task.set_resources([skyless.Resources(cloud="gcp"), skyless.Resources(cloud="aws")])
    assert [r.cloud for r in task.resources] == ["gcp", "aws"]  # ordered
    task.set_resources_override({"use_spot": True})
    assert all(r.use_spot for r in task.resources)
    task.update_envs({"LR": "0.1"}).update_file_mounts({"/data": str(tmp_path)})
    assert task.envs == {"EPOCHS": "3", "LR": "0.1"} and task.file_mounts == {"/data": str(tmp_path)}


def test_commands_as_lists_and_a_git_workdir_are_taken_as_sky_task_takes_them() -> None:
    repo = {"url": "https://github.com/skypilot-org/skypilot.git", "ref": "master"}
    task = skyless.Task(setup=["pip install a", "pip install b"], run=["python a.py", "python b.py"],
                        workdir=repo)  # fmt: skip
    assert task.setup == "pip install a\npip install b" and task.run == "python a.py\npython b.py"
    assert task.workdir == "https://github.com/skypilot-org/skypilot.git"
    task.run = ["echo 1", "echo 2"]
    assert task.to_yaml_config()["run"] == "echo 1\necho 2"


def test_a_failed_change_leaves_the_task_as_it_was() -> None:
    task = skyless.Task(run="echo", resources=skyless.Resources(cpus="2+"))
    with pytest.raises(skyless.UserError):
        task.num_nodes = -1
    with pytest.raises(skyless.UserError):
        task.set_resources({"accelerators": "A100:x"})
    assert task.num_nodes == 1 and task.to_yaml_config() == {"run": "echo", "resources": {"cpus": "2+"}}


def test_from_yaml_keeps_the_file_and_names_file_and_line_in_errors(tmp_path: Path) -> None:
    task = skyless.Task.from_yaml(ROOT / "examples" / "dev_cluster.yaml", env_overrides={"A": "1"})
    assert task.name == "dev" and task.envs == {"A": "1"} and task.filename.endswith("dev_cluster.yaml")
    assert task.resources == {skyless.Resources(cpus="2+", autostop="30m")}
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nresources:\n  cpus: lots\nrun: echo\n")
    with pytest.raises(skyless.TaskFileError) as caught:
        skyless.Task.from_yaml(bad)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(bad), 3, "resources.cpus")
    secret = tmp_path / "secret.yaml"
    secret.write_text("# a comment\nname: s\nsecrets:\n  HF_TOKEN: null\nrun: echo\n")
    assert skyless.Task.from_yaml(secret).to_yaml() == secret.read_text()  # submitted as written
    from cli.job_commands import prepare_launch
    from cli.task_options import resource_overrides

    loaded = skyless.Task.from_yaml(secret)
    with pytest.raises(skyless.TaskFileError) as needed:  # what launch checks: the line is the file's
        prepare_launch(loaded.to_yaml(), loaded.filename, {}, {}, resource_overrides())
    assert needed.value.line == 4 and needed.value.file == str(secret)
    two = tmp_path / "two.yaml"
    two.write_text("name: a\nrun: x\n---\nname: b\nrun: y\n")
    with pytest.raises(skyless.TaskFileError, match="holds 2 tasks"):
        skyless.Task.from_yaml(two)
    assert (
        skyless.Task.from_yaml_config({"run": "x", "resources": {"ordered": [{"cloud": "aws"}]}}).run == "x"
    )
    choices = skyless.Resources.from_yaml_config(
        {"use_spot": True, "any_of": [{"cloud": "aws"}, {"cloud": "gcp"}]}
    )
    assert isinstance(choices, set) and all(r.use_spot for r in choices)


def test_launch_result_unpacks_as_sky_launch_answers() -> None:
    status = ClusterStatus("dev", "UP", "aws", "us-east-1", None, "m6i.large", 1, False, None, 0.1, 0.0,
                           -1, False, 0, None)  # fmt: skip
    result = LaunchResult(3, ClusterHandle("dev", status, "reused"))
    job_id, handle = result
    assert job_id == 3 and handle.cluster_name == "dev" and result.cluster_name == "dev"
    assert skyless.get(result) is result


def test_importing_skyless_loads_no_aws_sdk_http_client_or_models() -> None:
    code = (
        "import sys, json, skyless; "
        "heavy = ('boto3', 'botocore', 'moto', 'httpx', 'pydantic', 'typer'); "
        "print(json.dumps([m for m in heavy if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(done.stdout) == []


class _Pages:
    """A cluster's job log as the API pages it: `pages` of (text, state), then nothing new."""

    def __init__(self, pages: list[tuple[str, str]], cluster_state: str = "UP") -> None:
        self.pages, self.cluster_state, self.reads = pages, cluster_state, 0

    def cluster_logs(self, name: str, job: object, *, rank: int = 0, after: str | None = None) -> object:
        from shared.api.cluster_models import ClusterLogsResponse

        text, state = self.pages[self.reads] if self.reads < len(self.pages) else ("", self.pages[-1][1])
        self.reads += 1
        return ClusterLogsResponse(cluster=name, job=1, rank=0, state=state, text=text,
                                   finished=state in ("SUCCEEDED", "FAILED", "CANCELLED"))  # fmt: skip

    def get_cluster(self, name: str) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(state=self.cluster_state)


def _tail(monkeypatch: pytest.MonkeyPatch, client: _Pages, **kwargs: object) -> tuple[int, str]:
    import io
    from contextlib import contextmanager

    from skyless import cluster_calls

    @contextmanager
    def connected():  # type: ignore[no-untyped-def]
        yield client

    monkeypatch.setattr(cluster_calls, "connected", connected)
    out = io.StringIO()
    code = cluster_calls.tail_logs("dev", 1, output_stream=out, poll_seconds=0, **kwargs)  # type: ignore[arg-type]
    return code, out.getvalue()


def test_tail_logs_answers_skypilots_exit_codes_and_keeps_the_last_lines(monkeypatch: pytest.MonkeyPatch):
    done = [("a\nb\n", "RUNNING"), ("c\n", "FAILED")]
    assert _tail(monkeypatch, _Pages(done)) == (100, "a\nb\nc\n")
    assert _tail(monkeypatch, _Pages([("a\nb\nc\n", "SUCCEEDED")]), tail=2) == (0, "b\nc\n")
    assert _tail(monkeypatch, _Pages([("x\n", "RUNNING")]), follow=False) == (101, "x\n")
    gone = _Pages([("x\n", "RUNNING")], cluster_state="TERMINATED")  # torn down under the job: no hang
    assert _tail(monkeypatch, gone) == (101, "x\n")
