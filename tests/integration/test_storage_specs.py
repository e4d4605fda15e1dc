"""`file_mounts` buckets as SkyPilot writes them: URLs and storage objects, read into what the node gets,
and the forms skyless does not serve refused at submit with file, line and field."""

from __future__ import annotations

import pytest

from shared.errors import UserError
from shared.storage.lifecycle import check_job_storage
from shared.storage.specs import bucket_mounts
from shared.store.tenancy import Grant, put_grant
from shared.task.loader import load_pipeline


def _mounts(mounts: str) -> list:
    text = f"resources:\n  cpus: 1+\nfile_mounts:\n{mounts}run: ls\n"
    return bucket_mounts(load_pipeline(text).tasks[0])


def test_bucket_urls_are_read_only_copies_of_existing_buckets():
    found = _mounts(
        "  /imagenet: s3://datasets/imagenet/train/\n  /weights: gs://models/llama\n  /r2data: r2://mine\n"
        "  /web: https://example.com/a\n  ~/local: ./local\n"
    )
    assert [(m.path, m.store, m.bucket, m.prefix, m.mode, m.read_only, m.managed) for m in found] == [
        ("/imagenet", "s3", "datasets", "imagenet/train", "COPY", True, False),
        ("/weights", "gcs", "models", "llama", "COPY", True, False),
        ("/r2data", "r2", "mine", "", "COPY", True, False),
    ]
    assert not any(m.write_back for m in found)


def test_a_named_storage_object_is_created_by_skyless_mounted_by_default_and_kept_unless_told():
    (ckpt, outputs, data) = _mounts(
        "  /ckpt:\n    name: my-ckpt\n"
        "  /outputs:\n    name: my-out\n    store: gcs\n    mode: copy\n    persistent: false\n"
        "  /data:\n    source: s3://shared-data/v2\n    mode: MOUNT_CACHED\n"
        "    config:\n      mount_cached:\n        read_only: true\n"
    )
    assert (ckpt.store, ckpt.bucket, ckpt.mode, ckpt.persistent, ckpt.managed, ckpt.write_back) == (
        None, "my-ckpt", "MOUNT", True, True, True)  # fmt: skip
    assert (outputs.store, outputs.mode, outputs.persistent) == ("gcs", "COPY", False)
    assert not outputs.write_back
    assert (data.store, data.bucket, data.prefix, data.managed, data.read_only, data.write_back) == (
        "s3", "shared-data", "v2", False, True, False)  # fmt: skip


def test_azure_containers_are_buckets_by_url_or_by_store_and_keep_their_storage_account():
    found = _mounts(
        "  /a: az://acct1/data/train/\n  /b: https://acct2.blob.core.windows.net/models/llama\n"
        "  /c:\n    name: my-ckpt\n    store: azure\n    mode: MOUNT_CACHED\n"
        "  /d:\n    source: az://acct1/logs\n    mode: MOUNT\n"
        "  /e: https://example.com/file.txt\n"
    )
    seen = [(m.path, m.store, m.account, m.bucket, m.prefix, m.mode, m.managed, m.write_back) for m in found]
    assert seen == [
        ("/a", "azure", "acct1", "data", "train", "COPY", False, False),
        ("/b", "azure", "acct2", "models", "llama", "COPY", False, False),
        ("/c", "azure", None, "my-ckpt", "", "MOUNT_CACHED", True, True),
        ("/d", "azure", "acct1", "logs", "", "MOUNT", False, True),
    ]


def test_an_azure_url_of_another_account_or_a_prefix_of_a_container_is_refused_at_submit(stack):
    settings = stack.with_(providers="azure=azure")
    text = "resources:\n  cpus: 1+\nfile_mounts:\n  /d: az://theirs/data\n  /m: az://ours/data\nrun: ls\n"
    pipeline = load_pipeline(text, filename="t.yaml")
    env = {"SKYLESS_STORES": "azure=azure", "SKYLESS_AZURE_STORAGE_ACCOUNT": "ours",
           "SKYLESS_AZURE_STORAGE_KEY": "a2V5"}  # fmt: skip
    prefixed = "resources:\n  cpus: 1+\nfile_mounts:\n  /m: az://ours/data/train\nrun: ls\n"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with pytest.raises(UserError) as caught:
            check_job_storage(settings, pipeline, owner="u1", filename="t.yaml", text=text)
        with pytest.raises(UserError) as prefix_refused:
            check_job_storage(settings, load_pipeline(prefixed), owner="u1", filename="p.yaml", text=prefixed)
    assert "storage account theirs is not reached by this deployment" in caught.value.message
    assert (caught.value.field, caught.value.line) == ("file_mounts./d", 4)
    assert (
        "a prefix of an Azure container (train/) cannot be given to a node alone"
        in prefix_refused.value.message
    )
    assert (prefix_refused.value.field, prefix_refused.value.line) == ("file_mounts./m", 4)


@pytest.mark.parametrize(
    ("mount", "field", "line", "message"),
    [
        ("  /c:\n    name: b1c\n    store: ibm\n", "file_mounts./c.store", 7, "store IBM is not reached"),
        ("  /c:\n    name: b1c\n    store: azure\n", "file_mounts./c", 5, "az:// buckets are not reached"),
        ("  /c:\n    source: [s3://a1, s3://b1]\n", "file_mounts./c.source", 6, "a list of sources"),
        ("  /c:\n    name: b1c\n    source: ./folder\n", "file_mounts./c.source", 7, "local folder"),
        ("  /c:\n    source: cos://x/c\n", "file_mounts./c.source", 6, "cos:// buckets are not"),
        ("  /c:\n    source: az://Acct/c1c\n", "file_mounts./c", 5, "not a valid Azure storage account"),
        ("  /c:\n    source: az://acct/c--c\n", "file_mounts./c", 5, "not a valid bucket name"),
        ("  /c:\n    name: Bad_Name\n", "file_mounts./c", 5, "not a valid bucket name"),
        ("  /c:\n    name: b1c\n  /c/d:\n    name: b2c\n", "file_mounts./c/d", 7, "cannot be nested"),
        ("  data:\n    name: b1c\n", "file_mounts.data", 5, "absolute or under ~/"),
        ("  /c:\n    source: s3://a1\n    store: gcs\n", "file_mounts./c.store", 7, "does not match"),
        ("  /c:\n    source: s3://THE-SKYLESS-BUCKET/x\n", "file_mounts./c", 5, "own bucket"),
        ("  /c:\n    name: THE-SKYLESS-BUCKET\n", "file_mounts./c", 5, "own bucket"),
        ("  /c: s3://THE-SKYLESS-BUCKET\n", "file_mounts./c", 5, "own bucket"),
        ("  /c: s3://ungranted-bucket/x\n", "file_mounts./c", 5, "not yours and not granted"),
    ],
)
def test_what_skyless_cannot_serve_is_refused_at_submit_naming_file_line_and_field(
    stack, mount: str, field: str, line: int, message: str
):
    settings = stack.with_(providers="aws=aws")  # not the local cloud: no namespace probe here
    mount = mount.replace("THE-SKYLESS-BUCKET", settings.bucket)
    text = f"name: t\nresources:\n  cpus: 1+\nfile_mounts:\n{mount}run: ls\n"
    pipeline = load_pipeline(text, filename="t.yaml")

    with pytest.raises(UserError) as caught:
        check_job_storage(settings, pipeline, owner="u1", filename="t.yaml", text=text)

    error = caught.value
    assert message in error.message, error
    assert (error.file, error.field, error.line) == ("t.yaml", field, line), error


def test_a_store_this_deployment_does_not_reach_is_refused_and_the_local_runtime_simulates_every_store(
    stack, monkeypatch: pytest.MonkeyPatch
):
    text = "resources:\n  cpus: 1+\nfile_mounts:\n  ~/w: gs://weights/llama\nrun: ls\n"
    pipeline = load_pipeline(text, filename="t.yaml")
    put_grant(stack, Grant("weights", "user:u1", "", write=False))
    check_job_storage(stack, pipeline, owner="u1", filename="t.yaml", text=text)  # `*=local`: simulated

    monkeypatch.setenv("SKYLESS_STORES", "s3=aws")
    with pytest.raises(UserError) as caught:
        check_job_storage(stack.with_(providers="aws=aws"), pipeline, owner="u1", filename="t", text=text)
    assert "gs:// buckets are not reached by this deployment" in caught.value.message
    assert (caught.value.field, caught.value.line) == ("file_mounts.~/w", 4)
