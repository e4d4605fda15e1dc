"""`file_mounts`: local files and folders are uploaded by the CLI and unpacked on every node; https:// URLs
are downloaded by the node; buckets are shared.storage's (tests/test_storage_*), skyless's own never (its
every spelling: tests/integration/test_tenant_walls_storage.py); other sources are refused at submit.
A git workdir (`workdir: {url, ref}`) is cloned on each node at `ref`, not silently left empty."""

from __future__ import annotations

import functools
import io
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner, Result

from cli.api_client import tar_path
from cli.main import app as cli
from local_runtime import ensure_local_runtime
from node_agent.agent.mounts import clone_workdir, mount_path, unpack_mount
from shared.config import Settings
from shared.errors import UserError
from shared.jobs.file_mounts import check_file_mounts, decode_keys, mount_sources
from shared.storage.access import StorageWalls
from shared.task.loader import load_pipeline
from shared.wiring import wiring_for

BUCKET = "prefix-artifacts"
WALLS = StorageWalls(BUCKET)


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def _task(mounts: str) -> object:
    text = f"name: m\nresources:\n  cpus: 1+\nfile_mounts:\n{mounts}run: ls\n"
    return load_pipeline(text, filename="m.yaml").tasks[0]


def test_sources_are_sorted_by_what_fetches_them() -> None:
    task = _task(
        "  ~/code: ./code\n  /data/a.csv: https://example.com/a.csv\n"
        f"  /data/b.bin: s3://{BUCKET}/datasets/b.bin\n"
    )

    with pytest.raises(UserError, match="own bucket") as caught:
        mount_sources(task, walls=WALLS)
    assert caught.value.field == "file_mounts./data/b.bin"

    task = _task("  ~/code: ./code\n  /data/a.csv: https://example.com/a.csv\n  /d: s3://datasets/b\n")
    found = {(m.path, m.kind, m.source) for m in mount_sources(task, walls=WALLS)}

    assert found == {("~/code", "upload", "./code"), ("/data/a.csv", "web", "https://example.com/a.csv")}


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        ("  /datasets: cos://some-bucket/x\n", "cos:// sources are not fetched by skyless"),
        ("  /imagenet: oci://someone-elses-bucket/imagenet\n", "oci:// sources are not fetched"),
    ],
)
def test_a_source_skyless_cannot_fetch_is_refused_naming_the_mount(mount: str, message: str) -> None:
    path = mount.split(":")[0].strip()
    pipeline = load_pipeline(f"resources:\n  cpus: 1+\nfile_mounts:\n{mount}run: ls\n", filename="t.yaml")

    with pytest.raises(UserError) as caught:
        check_file_mounts(pipeline, {}, owner="u1", walls=WALLS, filename="t.yaml")

    assert message in caught.value.message
    assert caught.value.field == f"file_mounts.{path}" and caught.value.file == "t.yaml"


def test_local_sources_need_the_callers_own_upload_and_bucket_objects_are_not_others_runs() -> None:
    pipeline = load_pipeline("resources:\n  cpus: 1+\nfile_mounts:\n  ~/c: ./c\nrun: ls\n")
    with pytest.raises(UserError, match="was not uploaded"):
        check_file_mounts(pipeline, {}, owner="u1", walls=WALLS)
    with pytest.raises(UserError, match="POST /uploads"):
        check_file_mounts(pipeline, {"~/c": "uploads/u2/abc/mount.tar.gz"}, owner="u1", walls=WALLS)
    check_file_mounts(pipeline, {"~/c": "uploads/u1/abc/mount.tar.gz"}, owner="u1", walls=WALLS)

    secrets = load_pipeline(
        f"resources:\n  cpus: 1+\nfile_mounts:\n  /s: s3://{BUCKET}/runs/job-1/secrets.json\n"
    )
    with pytest.raises(UserError, match="own bucket"):
        check_file_mounts(secrets, {}, owner="u1", walls=WALLS)


def test_a_file_lands_as_that_file_and_a_folder_as_that_folder(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "x.txt").write_text("in a folder\n")
    single = tmp_path / "settings.yaml"
    single.write_text("lr: 0.1\n")
    home = tmp_path / "home"

    unpack_mount(tar_path(folder, field="f"), mount_path("~/data", home))
    unpack_mount(tar_path(single, field="f"), mount_path("/etc/app/config.yaml", home, sandboxed=True))

    assert (home / "data" / "sub" / "x.txt").read_text() == "in a folder\n"
    assert (home / "etc" / "app" / "config.yaml").read_text() == "lr: 0.1\n"
    assert mount_path("/etc/app", home) == Path("/etc/app")  # a VM writes where the task says


def test_a_mount_archive_that_escapes_its_folder_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("./ok.txt", "../escape.txt"):
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))

    with pytest.raises(ValueError, match="escapes"):
        unpack_mount(buffer.getvalue(), tmp_path / "mount")
    assert not (tmp_path / "escape.txt").exists()


def test_launch_uploads_each_local_mount_and_the_job_keeps_their_keys(
    stack: Settings, tmp_path: Path, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.csv").write_text("a,b\n")
    (tmp_path / "lr.txt").write_text("0.1\n")
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "t.yaml"
    task.write_text(
        "resources:\n  cpus: 1+\nfile_mounts:\n  ~/data: ./data\n  /cfg/lr.txt: lr.txt\nrun: ls\n"
    )

    result = _run("launch", str(task), "-d", *cli_api)

    assert result.exit_code == 0, result.output
    job = wiring_for(stack).store.get(result.output.split("Job ", 1)[1].split()[0])
    assert job is not None
    keys = decode_keys(job.file_mounts)
    assert set(keys) == {"~/data", "/cfg/lr.txt"}
    assert all(key.startswith("uploads/") for key in keys.values())


def test_launch_refuses_an_unfetchable_mount_and_a_missing_local_source_clearly(
    tmp_path: Path, cli_api: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    gcs = tmp_path / "gcs.yaml"
    gcs.write_text("resources:\n  cpus: 1+\nfile_mounts:\n  ~/here: .\n  /data: cos://bucket/data\nrun: ls\n")
    missing = tmp_path / "missing.yaml"
    missing.write_text("resources:\n  cpus: 1+\nfile_mounts:\n  /data: ./nowhere\nrun: ls\n")

    refused = _run("launch", str(gcs), "-d", *cli_api)
    absent = _run("launch", str(missing), "-d", *cli_api)

    assert refused.exit_code == 2
    assert "file_mounts./data: cos:// sources are not fetched by skyless" in refused.output
    assert "Uploading" not in refused.output  # refused before the local folder is uploaded
    assert absent.exit_code == 2 and "file_mounts./data: ./nowhere does not exist" in absent.output
    assert "Traceback" not in refused.output + absent.output


LOCAL_CREDENTIALS = {
    "region_name": "us-east-1",
    "aws_access_key_id": "skyless-local",
    "aws_secret_access_key": "skyless-local",
}


@contextmanager
def web_server(folder: Path) -> Iterator[int]:
    """A real HTTP server of `folder` on a free port (an https:// source's stand-in)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_two_nodes_read_the_workdir_and_every_mount_and_launch_shows_both_logs(
    tmp_path: Path, local_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('from the workdir')\n")
    (tmp_path / "data" / "part").mkdir(parents=True)
    (tmp_path / "data" / "part" / "rows.csv").write_text("from a mounted folder\n")
    (tmp_path / "lr.txt").write_text("from a mounted file\n")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "page.txt").write_text("from a web server\n")
    monkeypatch.chdir(tmp_path)
    runtime = ensure_local_runtime()
    s3 = boto3.client("s3", endpoint_url=runtime.aws_endpoint_url, **LOCAL_CREDENTIALS)
    s3.create_bucket(Bucket="lab-datasets")  # in the account, not skyless's: usable once an admin grants it
    s3.put_object(Bucket="lab-datasets", Key="datasets/obj.txt", Body=b"from a granted bucket\n")
    granted = _run("admin", "buckets", "grant", "lab-datasets", "--user", "u-local", "--prefix", "datasets")
    assert granted.exit_code == 0, granted.output
    task = tmp_path / "mounts.yaml"
    task.write_text(
        "name: mounts\nnum_nodes: 2\nworkdir: code\nresources:\n  cpus: 1+\n"
        "file_mounts:\n  ~/data: ./data\n  /etc/skyless-test/lr.txt: ./lr.txt\n"
        "  ~/page.txt: http://127.0.0.1:$WEB_PORT/page.txt\n"
        "  ~/obj: s3://lab-datasets/datasets\n"
        "run: |\n  python3 train.py\n"
        "  cat ~/data/part/rows.csv /etc/skyless-test/lr.txt ~/page.txt ~/obj/obj.txt\n"
        "  echo node $SKYPILOT_NODE_RANK done\n"
    )

    with web_server(tmp_path / "web") as port:
        result = _run("launch", str(task), "--env", f"WEB_PORT={port}")

    assert result.exit_code == 0, result.output
    fetched = ("from the workdir", "from a mounted folder", "from a mounted file", "from a web server",
               "from a granted bucket")  # fmt: skip
    for rank, name in ((0, "head"), (1, "worker1")):
        prefix = f"({name}, rank={rank}) "
        for line in (*fetched, f"node {rank} done"):
            assert prefix + line in result.output, result.output
    assert "\nnode 0 done" not in result.output  # every line of a multi-node job carries its node

    logs = _run("logs", result.output.split("Job ", 1)[1].split()[0], "--rank", "1")
    assert "node 1 done" in logs.output and "(worker1" not in logs.output and "node 0" not in logs.output


def _repo(tmp_path: Path) -> Path:
    """A real git repository: `v1` tags the first commit, the default branch has moved on."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (repo / "version.txt").write_text("one\n")
    git("add", ".")
    git("commit", "-qm", "first")
    git("tag", "v1")
    (repo / "version.txt").write_text("two\n")
    git("commit", "-qam", "second")
    return repo


def test_the_node_clones_the_repository_at_the_ref(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    clone_workdir({"url": str(repo), "ref": "v1"}, tmp_path / "at-tag")
    clone_workdir({"url": str(repo), "ref": None}, tmp_path / "at-head")

    assert (tmp_path / "at-tag" / "version.txt").read_text() == "one\n"
    assert (tmp_path / "at-head" / "version.txt").read_text() == "two\n"


def test_a_later_job_moves_the_clusters_clone_to_its_ref_as_sky_updates_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    workdir = tmp_path / "sky_workdir"
    branch = subprocess.run(
        ["git", "-C", str(repo), "branch", "--show-current"], check=True, capture_output=True, text=True
    ).stdout.strip()
    clone_workdir({"url": str(repo), "ref": "v1"}, workdir)
    (workdir / "scratch.txt").write_text("left by the first job\n")

    clone_workdir({"url": f"{repo}/", "ref": None}, workdir)  # the default branch, the same repository
    assert (workdir / "version.txt").read_text() == "two\n"
    (repo / "version.txt").write_text("three\n")
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "third"], check=True)
    clone_workdir({"url": str(repo), "ref": branch}, workdir)  # a branch: its newest commit
    assert (workdir / "version.txt").read_text() == "three\n"
    clone_workdir({"url": str(repo), "ref": "v1"}, workdir)
    assert (workdir / "version.txt").read_text() == "one\n"
    assert (workdir / "scratch.txt").exists()  # untracked files stay, as git checkout leaves them

    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)
    with pytest.raises(ValueError, match=r"holds a clone of another repository than .*other"):
        clone_workdir({"url": str(other), "ref": None}, workdir)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "train.py").write_text("print(1)\n")
    with pytest.raises(ValueError, match="git remote failed: fatal: not a git repository"):
        clone_workdir({"url": str(repo), "ref": None}, tmp_path / "plain")


def test_a_repository_that_cannot_be_cloned_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="git clone failed"):
        clone_workdir({"url": str(tmp_path / "nowhere"), "ref": None}, tmp_path / "w")


def test_launch_runs_in_the_cloned_workdir(tmp_path: Path, local_home: Path) -> None:
    repo = _repo(tmp_path)
    task = tmp_path / "git.yaml"
    task.write_text(
        f"name: git\nworkdir:\n  url: {repo}\n  ref: v1\nresources:\n  cpus: 1+\n"
        "run: |\n  set -e\n  git log -1 --format=%s\n  cat version.txt\n"
    )

    result = _run("launch", str(task))

    assert result.exit_code == 0, result.output
    assert "first\none\n" in result.output

    missing = tmp_path / ("a-repository-that-is-not-there-" * 6)
    task.write_text(f"name: nogit\nworkdir:\n  url: {missing}\nresources:\n  cpus: 1+\nrun: echo never\n")
    failed = _run("launch", str(task))

    assert failed.exit_code == 1, failed.output
    last = failed.output.strip().splitlines()[-1]  # the reason, however long, on the job's last line
    assert last.startswith("Job ") and "FAILED: " in last and "git clone failed" in last, failed.output
    assert len(last) > 200  # not cut into lines of the 200 columns a pipe gets
