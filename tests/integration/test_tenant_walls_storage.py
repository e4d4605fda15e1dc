"""Tenant walls at the storage layer, tried as a hostile user of a shared deployment would (issue 19).

Three users in two teams (alice and carol in `vision`, bob in `nlp`) and an admin, on one stack, through
the real Chalice app with their own keys. Every spelling of skyless's own bucket as a mount source, on
every route that takes a task (jobs, schedules, named-cluster launch and exec, an upload under tasks/);
another user's buckets and prefixes; a bucket of the account nobody claimed; a grant's prefix and its
read-only bit; the credentials a node is handed (the STS session policy, evaluated by
tests/iam_evaluation.py: moto enforces no IAM), and what a revoked grant leaves a running node. The
attacks of the issue are here by name: another user's cluster secrets.json through a file mount, an
unclaimed account bucket, the bucket without its trailing slash.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from chalice.test import Client
from conftest import QueueDriver
from iam_evaluation import IamRequest, allowing_statement

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.submit.app import app
from functions.submit.handler import handler as submit_handler
from shared.aws.sessions import botocore_session
from shared.config import Settings
from shared.jobs.tokens import agent_token
from shared.storage.registry import claim_bucket
from shared.store.users import create_user
from shared.wiring import wiring_for

HEAD = "name: t\nresources:\n  cpus: 1+\nfile_mounts:\n"  # the mount's key is on line 5


class Caller:
    def __init__(self, client: Client, key: str, user_id: str = "") -> None:
        self.client, self.key, self.user_id = client, key, user_id
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def get(self, path: str) -> Any:
        return self.client.http.get(path, headers=self.headers)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.http.post(path, headers=self.headers, body=json.dumps(body or {}))

    def delete(self, path: str) -> Any:
        return self.client.http.delete(path, headers=self.headers)


@dataclass
class Tenants:
    stack: Settings
    admin: Caller
    alice: Caller
    bob: Caller
    carol: Caller
    alice_bucket: str  # created by skyless for alice (the registry)
    bob_bucket: str  # created by skyless for bob
    unclaimed: str  # in the account, nobody's in skyless (a deploy bucket, Terraform state, ...)
    corpus: str  # granted to team nlp, prefix `public`, read-only


def _s3(stack: Settings) -> Any:
    return boto3.client("s3", endpoint_url=stack.endpoint_url, region_name=stack.region)


@pytest.fixture
def tenants(stack: Settings) -> Iterator[Tenants]:
    with Client(app) as client:
        admin = Caller(client, create_user("admin", stack, admin=True))

        def user(name: str) -> Caller:
            made = admin.post("/admin/users", {"name": name})
            assert made.status_code == 201, made.json_body
            return Caller(client, made.json_body["api_key"], made.json_body["user_id"])

        alice, bob, carol = user("alice"), user("bob"), user("carol")
        for team, members in (("vision", (alice, carol)), ("nlp", (bob,))):
            assert admin.post("/admin/teams", {"team": team}).status_code == 201
            for member in members:
                added = admin.post(f"/admin/teams/{team}/members", {"user_id": member.user_id})
                assert added.status_code == 200, added.json_body
        s3, tag = _s3(stack), uuid.uuid4().hex[:8]
        names = {kind: f"{kind}-{tag}" for kind in ("alice-ckpt", "bob-data", "tfstate", "corpus")}
        for name in names.values():
            s3.create_bucket(Bucket=name)
            s3.put_object(Bucket=name, Key="public/a.txt", Body=b"a")
        for kind, owner in (("alice-ckpt", alice), ("bob-data", bob)):
            claim_bucket(stack, bucket=names[kind], store="s3", owner=owner.user_id, created_by="job-seed",
                         persistent=True)  # fmt: skip
        granted = admin.post(
            "/admin/buckets/grants", {"bucket": names["corpus"], "team": "nlp", "prefix": "public"}
        )
        assert granted.status_code == 200, granted.json_body
        buckets = (names[kind] for kind in ("alice-ckpt", "bob-data", "tfstate", "corpus"))
        yield Tenants(stack, admin, alice, bob, carol, *buckets)


def _mount(source: str) -> str:
    return f"{HEAD}  /m: {source}\nrun: ls\n"


def _submit(caller: Caller, task: str) -> Any:
    return caller.post("/jobs", {"task": task, "filename": "t.yaml"})


def _refused(answer: Any, message: str, field: str = "file_mounts./m") -> dict[str, Any]:
    assert answer.status_code == 400, answer.json_body
    body = answer.json_body
    assert message in body["message"], body
    assert body["field"] == field and body["file"] == "t.yaml" and body["line"] == 5, body
    return dict(body)


# -- skyless's own bucket, every spelling, every route ------------------------------------------------------


def _spellings(stack: Settings) -> list[str]:
    bucket = stack.bucket
    endpoint = urlsplit(str(stack.endpoint_url))
    cluster_secrets = "clusters/c-0a1b2c3d/jobs/1/secrets.json"  # a cluster id is in instance names and tags
    return [
        f"s3://{bucket}/{cluster_secrets}",  # the attack: another user's cluster secrets
        f"s3://{bucket}/runs/job-123/secrets.json",
        f"s3://{bucket}/tasks/u-other/train.yaml",
        f"s3://{bucket}/uploads/u-other/x/mount.tar.gz",
        f"s3://{bucket}",  # no trailing slash: the whole bucket
        f"s3://{bucket}/",
        f"s3://{bucket.upper()}/runs/",
        f"s3://{bucket}./runs/",
        f"s3://%{ord(bucket[0]):x}{bucket[1:]}/runs/",
        f"gs://{bucket}/runs/",  # every store is this same S3 on the local runtime
        f"r2://{bucket}",
        f"https://{bucket}.s3.amazonaws.com/{cluster_secrets}",
        f"https://{bucket}.s3.us-east-1.amazonaws.com/runs/job-123/secrets.json",
        f"https://{bucket.upper()}.S3.AMAZONAWS.COM/x",
        f"https://s3.amazonaws.com/{bucket}/{cluster_secrets}",
        f"https://s3.us-east-1.amazonaws.com//{bucket}/x",
        f"https://s3.amazonaws.com/%{ord(bucket[0]):x}{bucket[1:]}/x",
        f"https://s3.us-east-1.amazonaws.com/{bucket}/runs/j/secrets.json?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIA%2F20261127&X-Amz-Signature=0123abcd",  # presigned-looking
        f"https://{bucket}.s3.amazonaws.com/x?AWSAccessKeyId=AKIA&Signature=abc&Expires=1",
        f"{endpoint.scheme}://{endpoint.netloc}/{bucket}/{cluster_secrets}",  # the local storage endpoint
        f"http://localhost:{endpoint.port}/any-bucket/x",  # any bucket through the endpoint, unsigned
        f"http://127.1:{endpoint.port}/any-bucket/x",
        f"http://[::1]:{endpoint.port}/any-bucket/x",
        f"{{source: s3://{bucket}/runs, mode: MOUNT}}",
        f"{{name: {bucket}}}",
        f"{{name: {bucket}, store: gcs, mode: COPY}}",
    ]


def test_every_spelling_of_skylesss_own_bucket_is_refused_at_submit_naming_field_and_line(
    tenants: Tenants,
) -> None:
    for source in _spellings(tenants.stack):
        answer = _submit(tenants.alice, _mount(source))
        body = _refused(answer, "", field="file_mounts./m")
        assert "own bucket" in body["message"] or "not a valid bucket name" in body["message"], (source, body)
    assert tenants.alice.get("/jobs").json_body["jobs"] == []  # nothing was recorded


def test_the_same_spellings_are_refused_on_schedules_clusters_and_exec(tenants: Tenants) -> None:
    alice = tenants.alice
    assert (
        alice.post("/clusters/dev/launch", {"task": "run: echo r\n"}).status_code == 201
    )  # INIT: exec checks
    for source in _spellings(tenants.stack)[:-3]:  # storage objects are refused on clusters before any lookup
        task = _mount(source)
        scheduled = alice.post(
            "/schedules", {"name": "n", "cron": "0 3 * * *", "task": task, "filename": "t.yaml"}
        )
        launched = alice.post("/clusters/other/launch", {"task": task, "filename": "t.yaml"})
        executed = alice.post("/clusters/dev/exec", {"task": task, "filename": "t.yaml"})
        for answer in (scheduled, launched, executed):
            assert answer.status_code == 400, (source, answer.json_body)
            assert answer.json_body["field"] == "file_mounts./m", (source, answer.json_body)
    assert alice.get("/schedules").json_body["schedules"] == []
    assert [c["name"] for c in alice.get("/clusters").json_body["clusters"]] == ["dev"]


def test_an_upload_naming_skylesss_bucket_gets_a_report_beside_it_and_runs_nothing(
    tenants: Tenants, queues: QueueDriver
) -> None:
    stack, s3 = tenants.stack, _s3(tenants.stack)
    key = f"tasks/{tenants.alice.user_id}/steal.yaml"
    s3.put_object(Bucket=stack.bucket, Key=key, Body=_mount(f"s3://{stack.bucket}").encode())

    assert submit_handler(queues.event(queues.receive("submit")), None) == {"batchItemFailures": []}

    report = json.loads(s3.get_object(Bucket=stack.bucket, Key=f"{key}.error.json")["Body"].read())
    assert "own bucket" in report["message"] and report["field"] == "file_mounts./m" and report["line"] == 5
    assert tenants.alice.get("/jobs").json_body["jobs"] == [] and queues.receive("provision") == []


# -- other users' buckets, unclaimed buckets, grants ---------------------------------------------------------


def test_another_users_bucket_is_refused_in_every_form_and_the_hint_is_the_grant_command(
    tenants: Tenants,
) -> None:
    bob_bucket, alice = tenants.bob_bucket, tenants.alice
    for source in (f"s3://{bob_bucket}", f"s3://{bob_bucket}/public", f"gs://{bob_bucket}/x",
                   f"{{source: s3://{bob_bucket}, mode: MOUNT}}", f"{{name: {bob_bucket}}}",
                   f"{{name: {bob_bucket}, store: gcs}}"):  # fmt: skip
        body = _refused(_submit(alice, _mount(source)), "belongs to another skyless user")
        assert f"skyless admin buckets grant {bob_bucket} --user {alice.user_id}" in body["hint"], body
    carol_on_alices = _submit(tenants.carol, _mount(f"s3://{tenants.alice_bucket}/x"))  # a teammate, too
    _refused(carol_on_alices, "belongs to another skyless user")
    assert _submit(alice, _mount(f"s3://{tenants.alice_bucket}/x")).status_code == 201  # her own


def test_an_unclaimed_bucket_of_the_account_is_refused_and_a_name_for_it_fails_the_launch_not_claims_it(
    tenants: Tenants, queues: QueueDriver
) -> None:
    alice, unclaimed = tenants.alice, tenants.unclaimed
    for source in (f"s3://{unclaimed}", f"s3://{unclaimed}/", f"{{source: s3://{unclaimed}, mode: MOUNT}}"):
        body = _refused(_submit(alice, _mount(source)), "is not yours and not granted to you")
        assert f"skyless admin buckets grant {unclaimed} --user {alice.user_id}" in body["hint"]

    named = _submit(alice, _mount(f"{{name: {unclaimed}, mode: MOUNT}}"))  # could be a new bucket: accepted
    assert named.status_code == 201, named.json_body
    for kind, handler in (("optimize", optimize_handler), ("provision", provision_handler)):
        assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}

    job = alice.get(f"/jobs/{named.json_body['job_id']}").json_body
    assert job["state"] == "FAILED" and "skyless did not create it for you" in job["reason"], job
    from shared.storage.registry import find_bucket

    assert find_bucket(tenants.stack, unclaimed) is None  # never claimed, so never alice's


def test_a_team_grant_reaches_its_members_in_its_prefix_only_and_read_only(tenants: Tenants) -> None:
    corpus, bob = tenants.corpus, tenants.bob
    assert _submit(bob, _mount(f"s3://{corpus}/public")).status_code == 201
    assert _submit(bob, _mount(f"s3://{corpus}/public/shard-1")).status_code == 201
    for source in (f"s3://{corpus}", f"s3://{corpus}/", f"s3://{corpus}/publicity", f"s3://{corpus}/private",
                   f"s3://{corpus}/public/../private", f"{{name: {corpus}}}"):  # fmt: skip
        assert _submit(bob, _mount(source)).status_code == 400, source
    writer = _refused(_submit(bob, _mount(f"{{source: s3://{corpus}/public, mode: MOUNT}}")), "read-only")
    assert "--prefix public --write" in writer["hint"]
    for outsider in (tenants.alice, tenants.carol):  # team vision: not granted
        _refused(_submit(outsider, _mount(f"s3://{corpus}/public")), "is not yours and not granted")


# -- what a node is handed ---------------------------------------------------------------------------------


@pytest.fixture
def assumed_policies() -> Iterator[list[dict[str, Any]]]:
    """The session policy of every STS AssumeRole the control plane makes (what node credentials can do)."""
    seen: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        seen.append(json.loads(params["Policy"]))

    session = botocore_session()
    session.register("provide-client-params.sts.AssumeRole", capture)
    yield seen
    session.unregister("provide-client-params.sts.AssumeRole", capture)


def _allowed(policy: dict[str, Any], action: str, resource: str, **context: Any) -> bool:
    return allowing_statement(policy["Statement"], IamRequest(action, resource, context)) is not None


def test_node_credentials_reach_exactly_the_granted_prefix_read_only_and_end_with_the_grant(
    tenants: Tenants, queues: QueueDriver, assumed_policies: list[dict[str, Any]]
) -> None:
    stack, bob, corpus, own = tenants.stack, tenants.bob, tenants.corpus, tenants.bob_bucket
    task = f"{HEAD}  /corpus: s3://{corpus}/public\n  /ckpt:\n    name: {own}\n    mode: MOUNT\nrun: ls\n"
    job_id = _submit(bob, task).json_body["job_id"]
    for kind, handler in (("optimize", optimize_handler), ("provision", provision_handler)):
        assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}
    job = wiring_for(stack).store.get(job_id)
    instance = next(iter(wiring_for(stack).store.cluster(job.cluster_id).nodes))
    node = Caller(tenants.admin.client, agent_token(stack, job_id, 0))

    answer = node.post(f"/agent/{job_id}/storage", {"instance_id": instance})

    assert answer.status_code == 200, answer.json_body
    entries = {e["path"]: e for e in answer.json_body["storage"]}
    assert (entries["/corpus"]["write_back"], entries["/ckpt"]["write_back"]) == (False, True)
    corpus_policy, own_policy = assumed_policies[-2:]
    arn = f"arn:aws:s3:::{corpus}"
    assert _allowed(corpus_policy, "s3:GetObject", f"{arn}/public/a.txt")
    assert _allowed(corpus_policy, "s3:ListBucket", arn, **{"s3:prefix": "public/"})
    for action, resource, context in (
        ("s3:PutObject", f"{arn}/public/a.txt", {}),  # a read-only grant
        ("s3:DeleteObject", f"{arn}/public/a.txt", {}),
        ("s3:GetObject", f"{arn}/private/a.txt", {}),  # outside the prefix
        ("s3:GetObject", f"{arn}/publicity/a.txt", {}),
        ("s3:ListBucket", arn, {"s3:prefix": "private/"}),
        ("s3:ListBucket", arn, {"s3:prefix": ""}),
        ("s3:GetObject", f"arn:aws:s3:::{stack.bucket}/runs/{job_id}/secrets.json", {}),  # skyless's own
        ("s3:GetObject", f"arn:aws:s3:::{tenants.alice_bucket}/public/a.txt", {}),  # another user's
    ):
        assert not _allowed(corpus_policy, action, resource, **context), (action, resource, context)
    assert _allowed(own_policy, "s3:PutObject", f"arn:aws:s3:::{own}/model.pt")
    assert not _allowed(own_policy, "s3:GetObject", f"{arn}/public/a.txt")

    revoked = tenants.admin.post(
        "/admin/buckets/revoke", {"bucket": corpus, "team": "nlp", "prefix": "public"}
    )
    assert revoked.status_code == 200, revoked.json_body
    renewed = node.post(f"/agent/{job_id}/storage", {"instance_id": instance})
    assert renewed.status_code == 403 and "file_mounts./corpus" in renewed.json_body["message"], (
        renewed.json_body
    )


# -- every route with the other user's key; admin routes with a user's ------------------------------------


def test_every_route_answers_another_users_key_as_if_nothing_were_there(tenants: Tenants) -> None:
    alice, bob = tenants.alice, tenants.bob
    job_id = _submit(alice, f"{HEAD}  /m: s3://{tenants.alice_bucket}/x\nrun: ls\n").json_body["job_id"]
    assert (
        alice.post("/schedules", {"name": "nightly", "cron": "0 3 * * *", "task": "run: ls\n"}).status_code
        == 201
    )
    assert alice.post("/clusters/dev/launch", {"task": "run: echo r\n"}).status_code == 201
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/logs", "/schedules/nightly", "/clusters/dev",
                 "/clusters/dev/queue", "/clusters/dev/jobs/1/logs"):  # fmt: skip
        assert bob.get(path).status_code == 404, path
        assert tenants.carol.get(path).status_code == 404, path  # a teammate sees; the walls stand
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI x"
    changes: list[tuple[str, dict[str, Any]]] = [
        (f"/jobs/{job_id}/cancel", {}), ("/schedules/nightly/pause", {}), ("/schedules/nightly/resume", {}),
        ("/clusters/dev/stop", {}), ("/clusters/dev/start", {}), ("/clusters/dev/down", {}),
        ("/clusters/dev/jobs/1/cancel", {}), ("/clusters/dev/autostop", {"idle_minutes": 5}),
        ("/clusters/dev/exec", {"command": "id"}), ("/clusters/dev/ssh", {"public_key": key}),
    ]  # fmt: skip
    for path, body in changes:
        assert bob.post(path, body).status_code == 404, path
    assert bob.delete("/schedules/nightly").status_code == 404
    for path in (f"/agent/{job_id}/status", f"/agent/{job_id}/storage"):  # a user's key is no node's token
        assert bob.post(path, {"instance_id": "i-x", "phase": "heartbeat"}).status_code == 401, path
    assert bob.get(f"/agent/{job_id}/config?instance_id=i-x").status_code == 401
    assert bob.get("/costs?all_users=true").status_code == 403
    assert [j["job_id"] for j in bob.get("/jobs").json_body["jobs"]] == []
    assert bob.get("/clusters").json_body["clusters"] == []
    uploads_of_alice = {
        "task": "run: ls\n",
        "file_mount_keys": {"~/x": f"uploads/{alice.user_id}/k/mount.tar.gz"},
    }
    taken = bob.post("/jobs", uploads_of_alice)
    assert taken.status_code == 400 and taken.json_body["field"] == "file_mount_keys.~/x"
    assert alice.get(f"/jobs/{job_id}").json_body["state"] != "CANCELLED"


def test_the_admin_routes_refuse_every_key_but_an_admins(tenants: Tenants) -> None:
    alice = tenants.alice
    me, bob = alice.user_id, tenants.bob.user_id
    calls = (("GET", "/admin/users", None), ("POST", "/admin/users", {"name": "mallory", "admin": True}),
             ("POST", f"/admin/users/{bob}/revoke", {}), ("GET", "/admin/teams", None),
             ("POST", "/admin/teams", {"team": "mine"}),
             ("POST", "/admin/teams/nlp/members", {"user_id": me}),
             ("DELETE", f"/admin/teams/nlp/members/{bob}", None),
             ("POST", "/admin/buckets/grants", {"bucket": tenants.bob_bucket, "user": me, "write": True}),
             ("POST", "/admin/buckets/revoke", {"bucket": tenants.corpus, "team": "nlp", "prefix": "public"}),
             ("GET", "/admin/buckets", None), ("GET", "/admin/audit", None))  # fmt: skip
    for method, path, body in calls:
        if method == "GET":
            answer = alice.get(path)
        elif method == "DELETE":
            answer = alice.delete(path)
        else:
            answer = alice.post(path, body)
        assert answer.status_code == 403 and "admin key" in answer.json_body["message"], (
            path,
            answer.json_body,
        )
        nobody = alice.client.http.request(method, path, body=b"{}" if method == "POST" else b"")
        assert nobody.status_code == 401, path
    assert _submit(alice, _mount(f"s3://{tenants.bob_bucket}/x")).status_code == 400  # no grant slipped in


def test_skylesss_own_bucket_cannot_be_granted_even_by_an_admin(tenants: Tenants) -> None:
    for bucket in (tenants.stack.bucket, tenants.stack.bucket + ".x"):
        answer = tenants.admin.post(
            "/admin/buckets/grants", {"bucket": bucket, "user": tenants.alice.user_id}
        )
        assert answer.status_code == 400 and answer.json_body["field"] == "bucket", answer.json_body


# -- teams: members see each other's work, read-only -------------------------------------------------------


def test_a_teams_members_see_its_jobs_and_clusters_read_only_and_no_one_else_does(tenants: Tenants) -> None:
    alice, carol, bob, admin = tenants.alice, tenants.carol, tenants.bob, tenants.admin
    job_id = _submit(alice, f"{HEAD}  /m: s3://{tenants.alice_bucket}/x\nrun: ls\n").json_body["job_id"]
    bobs_job = _submit(bob, "run: ls\n").json_body["job_id"]
    assert alice.post("/clusters/dev/launch", {"task": "run: echo r\n"}).status_code == 201

    jobs = carol.get("/teams/vision/jobs").json_body["jobs"]
    assert [(j["job_id"], j["owner"]) for j in jobs] == [(job_id, alice.user_id)]
    assert carol.get(f"/teams/vision/jobs/{job_id}").json_body["job_id"] == job_id
    clusters = carol.get("/teams/vision/clusters").json_body["clusters"]
    assert [(c["name"], c["owner"]) for c in clusters] == [("dev", alice.user_id)]
    assert carol.get("/teams").json_body["teams"] == [
        {"team": "vision", "members": sorted([alice.user_id, carol.user_id])}
    ]
    assert carol.get(f"/teams/vision/jobs/{bobs_job}").status_code == 404  # not a member's job
    for path in ("/teams/vision/jobs", f"/teams/vision/jobs/{job_id}", "/teams/vision/clusters",
                 f"/teams/nlp/jobs/{job_id}", "/teams/nope/jobs", "/teams/Bad_Name/jobs"):  # fmt: skip
        assert bob.get(path).status_code == 404, path
    for path in (
        f"/jobs/{job_id}/cancel",
        "/clusters/dev/stop",
        "/clusters/dev/down",
    ):  # read-only: no change
        assert carol.post(path).status_code == 404, path
    assert alice.get(f"/jobs/{job_id}").json_body["state"] != "CANCELLED"

    assert admin.delete(f"/admin/teams/vision/members/{carol.user_id}").status_code == 200
    assert carol.get("/teams/vision/jobs").status_code == 404  # gone with the membership


# -- the admin verbs, as an admin types them --------------------------------------------------------------


def test_the_admin_verbs_as_an_admin_types_them_and_the_audit_log_shows_each(stack: Settings) -> None:
    from conftest import _free_port
    from typer.testing import CliRunner

    from cli.main import app as cli
    from local_runtime.api_server import ApiServer

    server = ApiServer(app, "127.0.0.1", _free_port())
    server.start()
    try:
        lead = ["--api-url", server.url, "--api-key", create_user("lead", stack, admin=True)]

        def run(*words: str, flags: list[str] = lead) -> Any:
            return CliRunner().invoke(cli, [*words, *flags], env={"COLUMNS": "250"})

        made = run("admin", "users", "create", "dana")
        assert made.exit_code == 0, made.output
        dana_id = made.output.split("created: ", 1)[1].split()[0]
        dana = ["--api-url", server.url, "--api-key", made.output.split("(shown once): ", 1)[1].split()[0]]
        steps = (("admin", "teams", "create", "vision"), ("admin", "teams", "add", "vision", dana_id),
                 ("admin", "buckets", "grant", "lab-data", "--team", "vision", "--prefix", "p"))  # fmt: skip
        for words in steps:
            done = run(*words)
            assert done.exit_code == 0, (words, done.output)
        assert dana_id in run("admin", "users", "list").output
        assert (
            "vision" in run("admin", "teams", "list").output
            and dana_id in run("admin", "teams", "list").output
        )
        listed = run("admin", "buckets", "list").output
        assert "lab-data" in listed and "team:vision" in listed and "read-only" in listed
        assert "vision" in run("team", "list", flags=dana).output

        refused = run("admin", "users", "list", flags=dana)  # a user's key
        assert refused.exit_code == 2 and "admin key" in refused.output
        bad = run("admin", "buckets", "grant", "Bad_Name", "--user", dana_id)
        assert bad.exit_code == 2 and "not a valid bucket name" in bad.output
        both = run("admin", "buckets", "grant", "lab-data", "--user", dana_id, "--team", "vision")
        assert both.exit_code == 2 and "one of them" in both.output
        mine = run("admin", "buckets", "grant", stack.bucket, "--user", dana_id)
        assert mine.exit_code == 2 and "never granted" in mine.output

        for words in (("admin", "buckets", "revoke", "lab-data", "--team", "vision", "--prefix", "p"),
                      ("admin", "teams", "remove", "vision", dana_id),
                      ("admin", "users", "revoke", dana_id)):  # fmt: skip
            done = run(*words)
            assert done.exit_code == 0, (words, done.output)
        gone = run("team", "list", flags=dana)
        assert gone.exit_code == 2 and "not recognised" in gone.output

        audit = run("admin", "audit").output
        actions = [word for line in audit.splitlines() for word in line.split() if word.count(".") == 1
                   and word.split(".")[0] in ("users", "teams", "buckets")]  # fmt: skip
        assert actions == ["users.revoke", "teams.remove", "buckets.revoke", "buckets.grant", "teams.add",
                           "teams.create", "users.create"], audit  # fmt: skip
    finally:
        server.stop()
