"""rclone, as a node runs it, against the GCS and Azure emulators with the node's own scoped credentials:
COPY of a prefix and of one object, the refusals Azurite enforces, and the checkpoint-resume story of
examples/spot.yaml on each store — the agent as a real process mounting the bucket with rclone (FUSE),
preempted through its cloud's metadata service, writing back before it reports `preempting`, and the next
attempt's agent resuming from the bucket with fresh credentials."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient
from fakes.azure_metadata import start_fake_azure_metadata
from fakes.gcp_metadata import start_fake_gcp_metadata
from fakes.store_emulators import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    FakeGoogleSts,
    RecordingProxy,
    fuse_or_skip,
    rclone_or_skip,
)
from test_agent import AgentProtocolServer, _config, _shipped_log, _start_agent, _wait_for

from node_agent.agent.buckets import write_credential_file
from node_agent.agent.runner import run_script
from shared.config import Settings
from shared.jobs.job_storage import mount_options
from shared.storage.backends import StorageBackends
from shared.storage.lifecycle import node_storage, prepare_job_storage, release_job_storage
from shared.storage.rclone import rclone_commands
from shared.store.tenancy import Grant, put_grant
from shared.task.loader import load_pipeline

pytest_plugins = ["fakes.store_fixtures"]
ROOT = Path(__file__).resolve().parents[2]
STEPS = 20  # room for the notice to come (a metadata poll) while the task still runs, on a busy machine


@pytest.fixture
def stores(
    stack: Settings,
    monkeypatch: pytest.MonkeyPatch,
    gcs_emulator: str,
    azurite: str,
    google_sts: FakeGoogleSts,
) -> Iterator[Settings]:
    """A deployment whose gcs and azure stores are the emulators (GCP tokens downscoped by the fake STS)."""
    rclone_or_skip()
    for name, value in {
        "SKYLESS_STORES": "s3=aws,gcs=gcs,azure=azure",
        "GOOGLE_OAUTH_ACCESS_TOKEN": google_sts.source_token,
        "GOOGLE_CLOUD_PROJECT": "p",
        "SKYLESS_GCS_ENDPOINT": gcs_emulator,
        "SKYLESS_GCS_STS_URL": google_sts.url,
        "SKYLESS_AZURE_STORAGE_ACCOUNT": AZURITE_ACCOUNT,
        "SKYLESS_AZURE_STORAGE_KEY": AZURITE_KEY,
        "SKYLESS_AZURE_BLOB_ENDPOINT": azurite,
    }.items():
        monkeypatch.setenv(name, value)
    yield stack.with_(providers="gcp=gcp,azure=azure")


def _job() -> Any:
    return SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:10]}", owner="u-a", attempt=0)


def _node_entries(settings: Settings, job: Any, task: Any, cloud: str, home: Path) -> list[dict[str, Any]]:
    """What the control plane sends a VM (shared.jobs.job_storage.storage_for_node), with the node's
    credentials written where its rclone reads them, as the agent writes them."""
    entries = node_storage(settings, job, task, cloud, session=f"skyless-{job.job_id}-0")
    for index, entry in enumerate(entries):
        entry["rclone"] = rclone_commands(entry, index, mount_options(task, entry["path"]))
        entry["rclone"] = json.loads(json.dumps(entry["rclone"]).replace("$HOME", str(home)))
    return entries


def _objects(settings: Settings, store: str, bucket: str) -> dict[str, bytes]:
    backend: Any = StorageBackends(settings).for_store(store)
    if store == "gcs":
        return {b.name: b.download_as_bytes() for b in backend.client().list_blobs(bucket)}
    container = backend.container(bucket)
    return {b.name: container.download_blob(b.name).readall() for b in container.list_blobs()}


def _put(settings: Settings, store: str, bucket: str, key: str, body: bytes) -> None:
    backend: Any = StorageBackends(settings).for_store(store)
    if store == "gcs":
        backend.client().bucket(bucket).blob(key).upload_from_string(body)
    else:
        backend.container(bucket).upload_blob(key, body, overwrite=True)


@pytest.mark.parametrize("store", ["gcs", "azure"])
def test_rclone_copies_a_prefix_and_one_object_with_the_nodes_own_credentials(
    stores: Settings, store: str, tmp_path: Path
):
    bucket = f"data-{uuid.uuid4().hex[:10]}"
    StorageBackends(stores).for_store(store).create(bucket)
    put_grant(stores, Grant(bucket, "user:u-a", "", write=False))  # not skyless's: usable once granted
    _put(stores, store, bucket, "train/a.txt", b"a")
    _put(stores, store, bucket, "train/sub/b.txt", b"b")
    _put(stores, store, bucket, "weights.bin", b"w")
    url = f"gs://{bucket}" if store == "gcs" else f"az://{AZURITE_ACCOUNT}/{bucket}"
    home = tmp_path / "node"
    text = (f"resources:\n  cpus: 1+\nfile_mounts:\n  {tmp_path}/train: {url}/train\n"
            f"  {tmp_path}/w.bin: {url}/weights.bin\nrun: ls\n")  # fmt: skip
    copies = load_pipeline(text).tasks[0]
    if store == "azure":  # a SAS names a whole container: copy it whole
        copies = load_pipeline(f"resources:\n  cpus: 1+\nfile_mounts:\n  {tmp_path}/train: {url}\nrun: ls\n")
        copies = copies.tasks[0]

    for entry in _node_entries(stores, _job(), copies, "gcp", home):
        write_credential_file(entry)
        config = Path(entry["rclone"]["credentials_file"])
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert "control-plane-token" not in config.read_text() and AZURITE_KEY not in config.read_text()
        code, output = run_script(entry["rclone"]["mount"], {**os.environ, **entry["rclone"]["env"]}, 120)
        assert code == 0, output

    if store == "gcs":
        assert (tmp_path / "train" / "a.txt").read_bytes() == b"a"
        assert (tmp_path / "train" / "sub" / "b.txt").read_bytes() == b"b"
        assert (tmp_path / "w.bin").read_bytes() == b"w"
    else:
        assert (tmp_path / "train" / "train" / "sub" / "b.txt").read_bytes() == b"b"
        assert (tmp_path / "train" / "weights.bin").read_bytes() == b"w"


def test_rclone_with_a_read_only_sas_cannot_write_and_a_sas_opens_no_other_container(
    stores: Settings, tmp_path: Path
):
    mine, other = (f"{kind}-{uuid.uuid4().hex[:10]}" for kind in ("mine", "other"))
    backend: Any = StorageBackends(stores).for_store("azure")
    for container in (mine, other):
        backend.create(container)
        backend.container(container).upload_blob("secret.txt", b"s")
    entry = {"path": str(tmp_path / "m"), "mode": "MOUNT", "store": "azure", "bucket": mine, "prefix": "",
             "write_back": False, **backend.node_access(mine, "", read_only=True, session="s")}  # fmt: skip
    entry["rclone"] = rclone_commands(entry, 0)
    entry["rclone"] = json.loads(json.dumps(entry["rclone"]).replace("$HOME", str(tmp_path)))
    write_credential_file(entry)
    env = {**os.environ, **entry["rclone"]["env"]}
    (tmp_path / "up.txt").write_text("x")

    def rclone(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["rclone", *args], env=env, capture_output=True, text=True, timeout=60)

    listed = rclone("lsf", f"skyless:{mine}")
    written = rclone("copyto", str(tmp_path / "up.txt"), f"skyless:{mine}/up.txt", "--retries", "1")
    assert listed.returncode == 0 and listed.stdout.split() == ["secret.txt"], listed.stderr
    assert written.returncode != 0 and "AuthorizationPermissionMismatch" in written.stderr, written.stderr
    assert set(_objects(stores, "azure", mine)) == {"secret.txt"}

    # The same SAS on another container: Azurite refuses it (rclone itself will not even try).
    token = entry["credentials"]["sas_url"].split("?", 1)[1]
    stranger = ContainerClient.from_container_url(f"{backend.service_url}/{other}?{token}")
    with pytest.raises(HttpResponseError) as refused:
        list(stranger.list_blobs())
    assert refused.value.status_code == 403
    assert rclone("lsf", f"skyless:{other}").returncode != 0


def _step(path: Path) -> int:
    """The step the task last wrote (0 while the file is missing or mid-write)."""
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text.isdigit() else 0


def _spot_task(mount: Path, store: str, bucket: str) -> Any:
    text = (ROOT / "examples" / "spot.yaml").read_text().replace("/checkpoint", str(mount))
    text = text.replace("    name: skyless-spot-counter-ckpt", f"    name: {bucket}\n    store: {store}")
    return load_pipeline(text).tasks[0]


@pytest.fixture
def unmount_after(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "checkpoint"
    yield mount
    subprocess.run(["fusermount3", "-uz", str(mount)], capture_output=True, check=False)


@pytest.mark.parametrize("store", ["gcs", "azure"])
def test_the_spot_example_resumes_from_a_gcs_bucket_or_azure_container_mounted_by_rclone(
    stores: Settings, store: str, moto_endpoint: str, tmp_path: Path, unmount_after: Path
):
    fuse_or_skip()
    mount = unmount_after
    bucket = f"spot-{uuid.uuid4().hex[:10]}"
    task = _spot_task(mount, store, bucket)
    job = _job()
    cloud = "gcp" if store == "gcs" else "azure"
    notes = prepare_job_storage(stores, job, task, cloud)
    assert notes == [f"bucket {'gs' if store == 'gcs' else 'az'}://{bucket} created for {mount} "
                     "(deleted when the job ends)"]  # fmt: skip
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    logs = f"logs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=logs)
    task_id = f"{job.job_id}-task-0"  # what the agent's config names SKYPILOT_TASK_ID
    step_file = mount / task_id / "step"

    def attempt(number: int, preempt: bool) -> str:
        home = tmp_path / f"node-{number}"  # a new VM each attempt
        config = _config(s3, logs, job.job_id, run=task.run, setup=task.setup)
        config["envs"] = {"STEPS": str(STEPS), "STEP_SECONDS": "1", "SETUP_SECONDS": "1",
                          "SKYLESS_ATTEMPT": str(number)}  # fmt: skip
        config["storage"] = _node_entries(stores, job, task, cloud, home)
        in_bucket_when_preempting: list[tuple[bytes | None, bytes]] = []
        if store == "gcs":
            fake, server = start_fake_gcp_metadata()
            metadata = {"SKYLESS_CLOUD": "gcp", "SKYLESS_GCP_METADATA_URL": fake.url}
        else:
            fake, server = start_fake_azure_metadata()
            metadata = {"SKYLESS_CLOUD": "azure", "SKYLESS_AZURE_METADATA_URL": fake.url}
        try:
            with AgentProtocolServer(config, not_ready_times=0) as api:

                def on_status(status: dict[str, Any]) -> None:
                    if status["phase"] == "preempting":
                        in_bucket = _objects(stores, store, bucket).get(f"{task_id}/step")
                        in_bucket_when_preempting.append((in_bucket, step_file.read_bytes()))

                api.on_status = on_status
                agent = _start_agent(api.url, job.job_id, home, SKYLESS_STORAGE_SYNC_SECONDS="60",
                                     SKYLESS_METADATA_POLL_SECONDS="1", **metadata)  # fmt: skip
                try:
                    if not preempt:
                        assert agent.wait(120) == 0, agent.stderr.read().decode()
                        assert api.phases() == ["setting_up", "running", "succeeded"]
                    else:
                        _wait_for(lambda: "running" in api.phases(), 60)
                        _wait_for(lambda: _step(step_file) >= 3, 60)
                        if store == "gcs":
                            fake.preempt()
                        else:
                            fake.schedule("Preempt", ["i-rank1"])
                        _wait_for(lambda: in_bucket_when_preempting, 60)
                        ((in_bucket, mounted),) = in_bucket_when_preempting
                        assert in_bucket == mounted and int(mounted) < STEPS, mounted  # written back first
                except AssertionError as error:
                    agent.kill()
                    log = agent.stderr.read().decode()[-3000:]
                    raise AssertionError(f"{error}; phases {api.phases()}; agent: {log}") from None
                finally:
                    if agent.poll() is None:
                        agent.kill()
                        agent.wait(10)
        finally:
            if store == "gcs":
                fake.release()
            server.stop()
            run_script(config["storage"][0]["rclone"]["unmount"], dict(os.environ), 30)  # the VM goes away
        return _shipped_log(s3, logs, f"runs/{job.job_id}/logs/1/")

    first = attempt(0, preempt=True)
    stopped_at = int(_objects(stores, store, bucket)[f"{task_id}/step"])
    last = attempt(1, preempt=False)

    assert "starting at step 0" in first and stopped_at >= 3
    assert re.search(rf"starting at step {stopped_at}\b", last), last
    assert f"finished: {STEPS} steps after 2 setup(s)" in last, last
    assert _objects(stores, store, bucket)[f"{task_id}/step"] == f"{STEPS}\n".encode()

    assert release_job_storage(stores, job, [task]) == [
        f"bucket {'gs' if store == 'gcs' else 'az'}://{bucket} deleted (persistent: false)"
    ]
    assert not StorageBackends(stores).for_store(store).exists(bucket)


def _names(settings: Settings, bucket: str) -> set[str]:
    backend: Any = StorageBackends(settings).for_store("gcs")
    return {blob.name for blob in backend.client().list_blobs(bucket)}


def test_a_gcs_mount_takes_the_token_the_agent_rewrites_once_the_old_one_expires(
    stores: Settings, gcs_emulator: str, tmp_path: Path, unmount_after: Path
):
    """rclone (lib/oauthutil) reads its config file again only when the token it holds is expired, which
    Go's oauth2 calls it 10 s before `expiry`; the agent has rewritten the file by then."""
    fuse_or_skip()
    proxy = RecordingProxy(gcs_emulator)
    proxy.server.start()
    try:
        bucket = f"refresh-{uuid.uuid4().hex[:10]}"
        StorageBackends(stores).for_store("gcs").create(bucket)
        # The mount, rclone's 5 s write-back delay and the first upload all happen under the first token.
        soon = datetime.now(UTC) + timedelta(seconds=60)
        first = {"access_token": "first", "expiration": soon.strftime("%Y-%m-%dT%H:%M:%SZ")}
        entry = {"path": str(unmount_after), "mode": "MOUNT", "store": "gcs", "bucket": bucket, "prefix": "",
                 "write_back": True, "api": "gcs", "endpoint": proxy.url, "credentials": first}  # fmt: skip
        entry["rclone"] = json.loads(json.dumps(rclone_commands(entry, 7)).replace("$HOME", str(tmp_path)))
        write_credential_file(entry)
        code, output = run_script(entry["rclone"]["mount"], {**os.environ, **entry["rclone"]["env"]}, 90)
        assert code == 0, output
        log = tmp_path / ".skyless" / "storage" / "7" / "rclone.log"

        def uploaded(name: str, body: bytes, seconds: float) -> None:
            """`name` reached the bucket, and is still there with `body` once rclone's upload queue is
            empty (rclone deletes an upload it finds corrupt and queues it again)."""
            try:
                _wait_for(lambda: name in _names(stores, bucket), seconds)
            except AssertionError:
                raise AssertionError(
                    f"{name} not uploaded in {seconds:.0f} s: {log.read_text()[-2000:]}"
                ) from None
            code, output = run_script(entry["rclone"]["flush"], dict(os.environ), 120)
            assert code == 0, f"rclone still has uploads queued: {output} {log.read_text()[-2000:]}"
            assert _objects(stores, "gcs", bucket).get(name) == body, log.read_text()[-2000:]

        (unmount_after / "before.txt").write_text("1")
        uploaded("before.txt", b"1", (soon - timedelta(seconds=10) - datetime.now(UTC)).total_seconds())
        assert set(proxy.authorizations) == {"Bearer first"}

        later = datetime.now(UTC) + timedelta(hours=1)  # what the agent does before credentials expire
        entry["credentials"] = {"access_token": "second", "expiration": later.strftime("%Y-%m-%dT%H:%M:%SZ")}
        write_credential_file(entry)
        time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds() + 2))  # the first token is dead
        proxy.authorizations.clear()
        (unmount_after / "after.txt").write_text("2")
        uploaded("after.txt", b"2", 60)
        assert set(proxy.authorizations) == {"Bearer second"}, proxy.authorizations
    finally:
        proxy.server.stop()


def test_the_agent_refreshes_the_token_of_a_mount_it_only_reads(
    stores: Settings, moto_endpoint: str, tmp_path: Path, unmount_after: Path, monkeypatch: pytest.MonkeyPatch
):
    """The agent asks for fresh credentials when they expire within CREDENTIAL_REFRESH_SECONDS for every
    rclone mount, not only for one it writes back: a read-only mount lost its bucket when its token died."""
    fuse_or_skip()
    monkeypatch.setenv("SKYLESS_STORAGE_CREDENTIAL_SECONDS", "300")  # inside the agent's refresh window
    bucket = f"read-{uuid.uuid4().hex[:10]}"
    StorageBackends(stores).for_store("gcs").create(bucket)
    put_grant(stores, Grant(bucket, "user:u-a", "", write=False))  # not skyless's: read-only once granted
    _put(stores, "gcs", bucket, "data.txt", b"d")
    mount = unmount_after
    source = (
        f"    source: gs://{bucket}\n    mode: MOUNT\n    config:\n      mount:\n        read_only: true\n"
    )
    task = load_pipeline(f"file_mounts:\n  {mount}:\n{source}run: ls\n").tasks[0]
    job, home = _job(), tmp_path / "node"
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    logs = f"logs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=logs)
    config = _config(s3, logs, job.job_id, run=f"echo read:$(cat {mount}/data.txt); sleep 8", setup=None)
    config["storage"] = _node_entries(stores, job, task, "gcp", home)
    (entry,) = config["storage"]
    assert entry["write_back"] is False
    issued = entry["credentials"]["access_token"]
    rclone_config = Path(entry["rclone"]["credentials_file"])
    fake, server = start_fake_gcp_metadata()
    try:
        with AgentProtocolServer(config, not_ready_times=0) as api:
            api.fresh_storage = lambda: _node_entries(stores, job, task, "gcp", home)
            agent = _start_agent(api.url, job.job_id, home, SKYLESS_STORAGE_SYNC_SECONDS="1",
                                 SKYLESS_CLOUD="gcp", SKYLESS_GCP_METADATA_URL=fake.url)  # fmt: skip
            try:
                assert agent.wait(120) == 0, agent.stderr.read().decode()[-3000:]
            finally:
                if agent.poll() is None:
                    agent.kill()
                    agent.wait(10)
            assert api.phases() == ["setting_up", "running", "succeeded"]
    finally:
        server.stop()
    assert "read:d" in _shipped_log(s3, logs, f"runs/{job.job_id}/logs/1/")
    assert api.storage_requests >= 1
    written = rclone_config.read_text()
    assert issued not in written and '"access_token":"downscoped-' in written, written
    assert stat.S_IMODE(rclone_config.stat().st_mode) == 0o600
