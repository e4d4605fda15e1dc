"""Google Cloud Storage and Azure Blob as stores of task buckets, against their emulators (started here):
buckets and containers created, found and deleted through the official clients; a job's bucket made,
claimed and removed at its end through the same lifecycle as S3's; each node's credentials scoped to its
bucket, prefix and mode — a downscoped token whose access boundary names them (the GCS emulator checks
no token, so the boundary is what is asserted), and a container SAS that Azurite itself refuses outside
its container and, read-only, for any write."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient
from fakes.store_emulators import AZURITE_ACCOUNT, AZURITE_KEY, FakeGoogleSts

from shared.config import Settings
from shared.errors import UserError
from shared.storage.azure_blob import AzureBlobBackend
from shared.storage.backends import StorageBackends, StoreError
from shared.storage.gcs import GCSBackend, access_boundary
from shared.storage.lifecycle import (
    StorageFailure,
    check_job_storage,
    node_storage,
    prepare_job_storage,
    release_job_storage,
)
from shared.storage.registry import find_bucket
from shared.task.loader import load_pipeline

pytest_plugins = ["fakes.store_fixtures"]
ROOT = Path(__file__).resolve().parents[2]


class StaticToken:
    def __init__(self, token: str) -> None:
        self.value = token

    def token(self) -> str:
        return self.value


def _name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def _gcs_objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    client = GCSBackend(StaticToken("x"), project="p", endpoint_url=endpoint).client()
    return {b.name: b.download_as_bytes() for b in client.list_blobs(bucket)}


def _azure(endpoint: str) -> BlobServiceClient:
    return BlobServiceClient(
        endpoint, credential={"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}
    )


def test_a_gcs_bucket_is_created_once_found_and_deleted_with_its_objects(gcs_emulator: str):
    backend = GCSBackend(StaticToken("control-plane-token"), project="p", endpoint_url=gcs_emulator)
    bucket = _name("ckpt")
    assert not backend.exists(bucket)

    backend.create(bucket)
    backend.create(bucket)  # a retried provision step
    backend.client().bucket(bucket).blob("run/step").upload_from_string(b"4\n")

    assert backend.exists(bucket) and _gcs_objects(gcs_emulator, bucket) == {"run/step": b"4\n"}
    backend.delete(bucket)
    backend.delete(bucket)  # already gone: nothing
    assert not backend.exists(bucket)


def test_an_azure_container_is_created_once_found_and_deleted_with_its_blobs(azurite: str):
    backend = AzureBlobBackend(AZURITE_ACCOUNT, AZURITE_KEY, azurite)
    container = _name("ckpt")
    assert not backend.exists(container)

    backend.create(container)
    backend.create(container)
    _azure(azurite).get_container_client(container).upload_blob("run/step", b"4\n")

    assert backend.exists(container)
    backend.delete(container)
    backend.delete(container)
    assert not backend.exists(container)
    wrong_key = AzureBlobBackend(AZURITE_ACCOUNT, "d3Jvbmc=", azurite)
    with pytest.raises(StoreError, match="not reachable"):
        wrong_key.exists(container)


def test_a_gcs_node_token_is_downscoped_to_its_bucket_and_prefix_and_read_only_where_the_mount_is(
    google_sts: FakeGoogleSts,
):
    backend = GCSBackend(StaticToken("control-plane-token"), project="p", sts_url=google_sts.url)

    writer = backend.node_access("ckpt", "job-1", read_only=False, session="s1")
    reader = backend.node_access("data", "", read_only=True, session="s2")

    assert writer["api"] == "gcs" and writer["endpoint"] == "https://storage.googleapis.com"
    (rule,) = google_sts.minted[writer["credentials"]["access_token"]]["accessBoundaryRules"]
    assert rule["availableResource"] == "//storage.googleapis.com/projects/_/buckets/ckpt"
    assert rule["availablePermissions"] == ["inRole:roles/storage.objectAdmin"]
    assert rule["availabilityCondition"]["expression"] == (
        "resource.name == 'projects/_/buckets/ckpt/objects/job-1' || "
        "resource.name.startsWith('projects/_/buckets/ckpt/objects/job-1/') || "
        "api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('job-1/')"
    )
    assert (
        google_sts.minted[reader["credentials"]["access_token"]]
        == access_boundary("data", "", read_only=True)["accessBoundary"]
    )
    (whole,) = access_boundary("data", "", read_only=True)["accessBoundary"]["accessBoundaryRules"]
    assert whole["availablePermissions"] == ["inRole:roles/storage.objectViewer"]
    assert "availabilityCondition" not in whole
    assert "control-plane-token" not in str(writer) + str(reader)  # the node never sees the source token

    refusing = GCSBackend(StaticToken("a-revoked-token"), sts_url=google_sts.url)
    with pytest.raises(StoreError, match="Google STS refused"):
        refusing.node_access("ckpt", "job-1", read_only=False, session="s3")


def test_an_azure_node_sas_opens_its_container_only_and_writes_only_where_the_mount_writes(azurite: str):
    backend = AzureBlobBackend(AZURITE_ACCOUNT, AZURITE_KEY, azurite, credential_seconds=600)
    mine, other = _name("mine"), _name("other")
    for container in (mine, other):
        backend.create(container)
        _azure(azurite).get_container_client(container).upload_blob("run/step", b"4\n")

    writer = backend.node_access(mine, "", read_only=False, session="s1")
    reader = backend.node_access(mine, "", read_only=True, session="s2")

    as_writer = ContainerClient.from_container_url(writer["credentials"]["sas_url"])
    as_writer.upload_blob("run/step", b"5\n", overwrite=True)
    as_writer.upload_blob("run/new", b"n")
    as_writer.delete_blob("run/new")
    as_reader = ContainerClient.from_container_url(reader["credentials"]["sas_url"])
    assert [b.name for b in as_reader.list_blobs()] == ["run/step"]
    assert as_reader.download_blob("run/step").readall() == b"5\n"
    with pytest.raises(HttpResponseError) as refused:
        as_reader.upload_blob("run/step", b"6\n", overwrite=True)
    assert refused.value.status_code == 403
    for sas_url in (writer["credentials"]["sas_url"], reader["credentials"]["sas_url"]):
        token = sas_url.split("?", 1)[1]
        stranger = ContainerClient.from_container_url(f"{azurite}/{other}?{token}")
        with pytest.raises(HttpResponseError) as refused:
            list(stranger.list_blobs())
        assert refused.value.status_code == 403
    assert "sp=rl&" in reader["credentials"]["sas_url"] and "sr=c" in reader["credentials"]["sas_url"]
    assert AZURITE_KEY not in str(writer) + str(reader)
    with pytest.raises(StoreError, match="cannot be limited to job-1/"):
        backend.node_access(mine, "job-1", read_only=True, session="s3")


def _gcs_and_azure_stores(
    monkeypatch: pytest.MonkeyPatch, gcs_emulator: str, azurite: str, sts: FakeGoogleSts
) -> None:
    for name, value in {
        "SKYLESS_STORES": "s3=aws,gcs=gcs,azure=azure",
        "GOOGLE_OAUTH_ACCESS_TOKEN": "control-plane-token",
        "GOOGLE_CLOUD_PROJECT": "p",
        "SKYLESS_GCS_ENDPOINT": gcs_emulator,
        "SKYLESS_GCS_STS_URL": sts.url,
        "SKYLESS_AZURE_STORAGE_ACCOUNT": AZURITE_ACCOUNT,
        "SKYLESS_AZURE_STORAGE_KEY": AZURITE_KEY,
        "SKYLESS_AZURE_BLOB_ENDPOINT": azurite,
    }.items():
        monkeypatch.setenv(name, value)


def test_a_jobs_gcs_bucket_and_azure_container_are_made_scoped_per_node_and_removed_at_its_end(
    stack: Settings, monkeypatch: pytest.MonkeyPatch, gcs_emulator: str, azurite: str, google_sts
):
    _gcs_and_azure_stores(monkeypatch, gcs_emulator, azurite, google_sts)
    settings = stack.with_(providers="gcp=gcp,azure=azure")
    on_gcp, on_azure, kept = _name("ckpt"), _name("ckpt"), _name("kept")
    text = (
        f"resources:\n  cpus: 1+\nfile_mounts:\n"
        f"  /checkpoint:\n    name: {on_gcp}\n    mode: MOUNT_CACHED\n    persistent: false\n"
        f"  /outputs:\n    name: {on_azure}\n    store: azure\n    persistent: false\n"
        f"  /kept:\n    name: {kept}\n    store: gcs\n    mode: COPY\n"
        "run: ls\n"
    )
    task = load_pipeline(text).tasks[0]
    job = SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:10]}", owner="u-a", attempt=0)
    backends = StorageBackends(settings)

    notes = prepare_job_storage(settings, job, task, "gcp")  # /checkpoint goes to the job's cloud's store
    assert (
        prepare_job_storage(settings, job, task, "azure") == []
    )  # the next attempt, elsewhere: no new buckets
    assert sorted(notes) == sorted([
        f"bucket gs://{on_gcp} created for /checkpoint (deleted when the job ends)",
        f"bucket az://{on_azure} created for /outputs (deleted when the job ends)",
        f"bucket gs://{kept} created for /kept (kept after the job)",
    ])  # fmt: skip
    assert (find_bucket(settings, on_gcp).store, find_bucket(settings, on_azure).store) == ("gcs", "azure")
    assert backends.for_store("gcs").exists(on_gcp) and backends.for_store("azure").exists(on_azure)

    entries = {e["path"]: e for e in node_storage(settings, job, task, "azure", session="s")}
    assert (entries["/checkpoint"]["api"], entries["/outputs"]["api"]) == ("gcs", "azure")
    boundary = google_sts.minted[entries["/checkpoint"]["credentials"]["access_token"]]
    assert boundary["accessBoundaryRules"][0]["availableResource"].endswith(f"/buckets/{on_gcp}")
    assert google_sts.minted[entries["/kept"]["credentials"]["access_token"]]["accessBoundaryRules"][0][
        "availablePermissions"
    ] == ["inRole:roles/storage.objectViewer"]  # COPY: nothing written back, so nothing writable
    outputs = ContainerClient.from_container_url(entries["/outputs"]["credentials"]["sas_url"])
    outputs.upload_blob("result.txt", b"done")

    release = release_job_storage(settings, job, [task])
    assert sorted(release) == sorted([f"bucket gs://{on_gcp} deleted (persistent: false)",
                                      f"bucket az://{on_azure} deleted (persistent: false)"])  # fmt: skip
    assert release_job_storage(settings, job, [task]) == []
    assert not backends.for_store("gcs").exists(on_gcp) and not backends.for_store("azure").exists(on_azure)
    assert backends.for_store("gcs").exists(kept)


def test_another_users_gcs_bucket_or_azure_container_is_refused_at_submit_and_at_launch(
    stack: Settings, monkeypatch: pytest.MonkeyPatch, gcs_emulator: str, azurite: str, google_sts
):
    _gcs_and_azure_stores(monkeypatch, gcs_emulator, azurite, google_sts)
    settings = stack.with_(providers="gcp=gcp,azure=azure")
    theirs_gcs, theirs_azure = _name("theirs"), _name("theirs")
    mounts = (
        f"  /a:\n    name: {theirs_gcs}\n    store: gcs\n  /b:\n    name: {theirs_azure}\n    store: azure\n"
    )
    text = f"resources:\n  cpus: 1+\nfile_mounts:\n{mounts}run: ls\n"
    task = load_pipeline(text).tasks[0]
    alice = SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:10]}", owner="u-alice", attempt=0)
    bob = SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:10]}", owner="u-bob", attempt=0)
    prepare_job_storage(settings, alice, task, "gcp")

    with pytest.raises(UserError, match=f"bucket {theirs_gcs} belongs to another skyless user"):
        check_job_storage(settings, load_pipeline(text), owner="u-bob", filename="b.yaml", text=text)
    with pytest.raises(StorageFailure, match="belongs to another skyless user"):
        prepare_job_storage(settings, bob, task, "gcp")
    only_azure = load_pipeline(f"resources:\n  cpus: 1+\nfile_mounts:\n  /b:\n    name: {theirs_azure}\n"
                               "    store: azure\nrun: ls\n").tasks[0]  # fmt: skip
    with pytest.raises(StorageFailure, match=f"file_mounts./b: bucket {theirs_azure} belongs to another"):
        prepare_job_storage(settings, bob, only_azure, "azure")


def test_a_local_cloud_node_is_not_sent_to_a_gcs_or_azure_store(stack: Settings, monkeypatch):
    monkeypatch.setenv("SKYLESS_STORES", "s3=local,gcs=gcs,azure=azure")
    monkeypatch.setenv("SKYLESS_AZURE_STORAGE_ACCOUNT", AZURITE_ACCOUNT)
    monkeypatch.setenv("SKYLESS_AZURE_STORAGE_KEY", AZURITE_KEY)
    task = load_pipeline(
        "resources:\n  cpus: 1+\nfile_mounts:\n  /c:\n    name: c-x1\n    store: azure\nrun: ls\n"
    )
    job = SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:10]}", owner="u-a", attempt=0)
    with pytest.raises(
        StorageFailure, match="a local-cloud node reaches S3-compatible stores only, not azure"
    ):
        prepare_job_storage(stack, job, task.tasks[0], "local")


def test_the_store_clients_are_imported_only_when_a_gcs_or_azure_bucket_is_touched():
    probe = (
        "import sys, functions.provision.handler, functions.submit.app\n"
        "from shared.config import Settings\n"
        "from shared.storage.backends import StorageBackends\n"
        "backends = StorageBackends(Settings.from_env())\n"
        "backends.for_store('gcs'), backends.for_store('azure')\n"
        "print(sorted(m for m in ('google.cloud.storage', 'azure.storage.blob') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYLESS_STORES": "gcs=gcs,azure=azure",
           "GOOGLE_OAUTH_ACCESS_TOKEN": "t", "SKYLESS_AZURE_STORAGE_ACCOUNT": "a",
           "SKYLESS_AZURE_STORAGE_KEY": "a2V5"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"  # cold starts of the handlers pay nothing for the stores' clients
