"""The deployed stack, proven as AWS calls it: every `AWS::Serverless::Function` of infra/template.yaml is
imported from its CodeUri folder by its `Handler` string, in a fresh process, with the environment the
template gives it (Globals + its own, Refs resolved to a moto stack's names), and invoked with an event of
each type its `Events` declare. Each answers as its event source expects.

One job goes through the functions in the order AWS would call them, on the `aws` provider the template's
default `Providers` names (EC2 on moto): the API submits it, optimize plans it, provision launches it, the
node agent's calls reach the API, a spot warning reaches spot_watch, the user cancels, the events stream
feeds notify and submit, and the schedules run reconcile, the reaper and the price refresh.

Every AWS call each function makes is recorded (tests/lambda_container.py) and kept for the IAM tests in
tests/test_template_iam.py, which compare them with each function's role.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from deployed_stack import (
    DeployedStack,
    create_template_only_resources,
    event_fixture,
    exported,
    launch_stray,
    page_event,
    send,
    sqs_of,
    with_cookies,
    with_header,
)
from fakes_pricing.aws_pricing import PriceListApi, ec2_product
from fakes_pricing.server import FakeServer
from iam_evaluation import ACCOUNT, IamRequest, allowing_statement, denying_statement, iam_requests
from template_resolution import (
    StackResolver,
    as_list,
    load_template,
    matches_pattern,
)

from shared.config import Settings
from shared.stack import create_stack
from shared.store.users import create_user, find_user

TASK = (
    "name: proof\nresources:\n  cpus: 2\nrun: echo hello from the deployed stack\n"
    "secrets:\n  HF_TOKEN: hf_secret_of_the_proof_job\n"
)


@pytest.fixture(scope="module")
def deployed(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployedStack]:
    tmp = tmp_path_factory.mktemp("deployed")
    settings = Settings(
        prefix=f"d{uuid.uuid4().hex[:8]}", endpoint_url=moto_endpoint, home=tmp / "home", providers="aws=aws"
    )
    create_stack(settings)
    parameters = {"Prefix": settings.prefix, "StorageBuckets": f"{settings.prefix}-tasks-*"}
    resolver = StackResolver(load_template(), parameters=parameters)
    create_template_only_resources(settings, resolver)
    yield DeployedStack(settings, resolver, tmp)


@pytest.fixture(scope="module")
def journey(deployed: DeployedStack) -> dict[str, Any]:
    """One job through every function, in the order AWS would call them; each step's answers."""
    d = deployed
    seen: dict[str, Any] = {}
    key = create_user("alice", d.settings)
    api = "ApiFunction"
    # the deployment's contracts, set by an admin: every plan below (API, optimize, submit) reads them
    contracts = {"file": "contracts.yaml", "text": "contracts: {discounts: [{cloud: aws, on_demand: 10}]}\n"}
    admin = create_user("root", d.settings, admin=True)
    [seen["contracts_set"]] = d.invoke(api, [d.http("PUT", "/admin/contracts", key=admin, body=contracts)])

    [openapi, root, unauthenticated, notify_on, schedule, upload, submitted] = d.invoke(
        api,
        [
            d.http("GET", "/openapi.json"),
            d.http("GET", "/"),
            d.http("GET", "/jobs"),
            d.http("PUT", "/notifications", key=key, body={"email": "alice@example.com"}),
            d.http(
                "POST",
                "/schedules",
                key=key,
                body={"name": "nightly", "cron": "0 3 * * *", "task": TASK, "clouds": ["aws"]},
            ),
            d.http("POST", "/uploads", key=key, body={"filename": "workdir.tar.gz", "size_bytes": 10}),
            d.http("POST", "/jobs", key=key, body={"task": TASK, "clouds": ["aws"]}),
        ],
    )
    seen.update(
        openapi=openapi,
        root=root,
        unauthenticated=unauthenticated,
        notify_on=notify_on,
        schedule=schedule,
        upload=upload,
        submitted=submitted,
    )
    assert submitted["statusCode"] == 201, submitted  # the API as Lambda calls it, not as it reads
    job_id = json.loads(submitted["body"])["job_id"]
    seen["job_id"] = job_id

    seen["optimize"] = d.invoke("OptimizeFunction", [d.sqs_batch("optimize")])
    seen["provision"] = d.invoke("ProvisionFunction", [d.sqs_batch("provision")])

    [detail] = d.invoke(api, [d.http("GET", f"/jobs/{job_id}", key=key)])
    seen["detail"] = detail
    nodes = json.loads(detail["body"])["cluster"]["nodes"]
    instance_id = nodes[0]["instance_id"]
    seen["instance_id"] = instance_id
    [reservation] = d.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    seen["node_profile"] = reservation["Instances"][0].get("IamInstanceProfile", {}).get("Arn")
    user_data = d.client("ec2").describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    seen["user_data"] = base64.b64decode(user_data["UserData"]["Value"]).decode()

    boot = exported(seen["user_data"], "SKYLESS_BOOT_TOKEN")
    agent_query = f"instance_id={instance_id}"
    [config, second_fetch] = d.invoke(
        api,
        [
            with_header(
                d.http("GET", f"/agent/{job_id}/config", key=boot, query=agent_query),
                "x-skyless-node-key",
                "node-key-of-the-agent",
            ),
            with_header(
                d.http("GET", f"/agent/{job_id}/config", key=boot, query=agent_query),
                "x-skyless-node-key",
                "someone-else",
            ),
        ],
    )
    seen.update(config=config, second_fetch=second_fetch)
    agent_token = json.loads(config["body"])["agent_token"]
    [running, logs] = d.invoke(
        api,
        [
            d.http(
                "POST",
                f"/agent/{job_id}/status",
                key=agent_token,
                body={"instance_id": instance_id, "phase": "running"},
            ),
            d.http("GET", f"/jobs/{job_id}/logs", key=key),
        ],
    )
    seen.update(running=running, logs=logs)

    warning = copy.deepcopy(event_fixture("ec2_spot_interruption_warning.json"))
    warning["detail"]["instance-id"] = instance_id
    warning["resources"] = [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"]
    send(d, "spot_watch", warning)
    seen["spot_watch"] = d.invoke("SpotWatchFunction", [d.sqs_batch("spot_watch")])
    [replanned] = d.invoke(api, [d.http("GET", f"/jobs/{job_id}", key=key)])
    seen["replanned"] = json.loads(replanned["body"])
    # spot_watch recovers and re-plans in the same call (its role may not launch: the template turns the
    # same-call relaunch off) and leaves the launch to provision; its fallback plan request (delayed 20 s) and
    # the first submit's (a job is planned at submit) arrive late, as duplicates: optimize answers them.
    send(d, "optimize", {"job_id": job_id, "attempt": 1})
    seen["after_warning"] = d.invoke("OptimizeFunction", [d.sqs_batch("optimize")])
    seen["relaunch"] = d.invoke("ProvisionFunction", [d.sqs_batch("provision")])
    [relaunched] = d.invoke(api, [d.http("GET", f"/jobs/{job_id}", key=key)])
    seen["relaunched"] = json.loads(relaunched["body"])
    # The relaunched node never reports: with no patience left, the sweep finds it lost.
    schedule_event = event_fixture("scheduled_event.json")
    d.extra_env["ReconcileFunction"] = {
        "SKYLESS_SILENT_AFTER_SECONDS": "0",
        "SKYLESS_BOOT_GRACE_SECONDS": "0",
    }
    seen["reconcile"] = d.invoke("ReconcileFunction", [schedule_event])
    [second] = d.invoke(api, [d.http("POST", "/jobs", key=key, body={"task": TASK, "clouds": ["aws"]})])
    second_id = json.loads(second["body"])["job_id"]
    [cancelled] = d.invoke(api, [d.http("POST", f"/jobs/{second_id}/cancel", key=key)])
    seen["cancelled"] = cancelled
    d.sqs_batch("optimize")  # the cancelled job's plan request: optimize would drop it
    seen["teardown"] = d.invoke("ProvisionFunction", [d.sqs_batch("teardown")])  # its own queue

    # A task file uploaded under tasks/ reaches the submit queue by the bucket's notification (S3 via SQS).
    owner = find_user(key, d.settings)
    assert owner is not None
    d.client("s3").put_object(
        Bucket=d.settings.bucket, Key=f"tasks/{owner.user_id}/nightly.yaml", Body=TASK.encode()
    )
    uploads = d.sqs_batch("submit")
    # a monthly budget, so a submit checks this month's spend (shared/jobs/budget_checks.py)
    d.invoke(api, [d.http("PUT", "/budget", key=key, body={"monthly": 1000})])
    firing = {
        "schedule_firing": {
            "owner": owner.user_id,
            "name": "nightly",
            "schedule_id": json.loads(schedule["body"])["schedule_id"],
            "scheduled_time": "2026-11-23T03:00:00+00:00",
        }
    }
    seen["uploads_batch"] = uploads
    seen["submit_queue"] = d.invoke("SubmitFunction", [uploads, sqs_of(d, "submit", firing)])

    records = d.stream_records()
    job_ended = d.functions["SubmitFunction"].events["JobEnded"]["Properties"]
    pattern = json.loads(job_ended["FilterCriteria"]["Filters"][0]["Pattern"])
    terminal = [r for r in records if matches_pattern(pattern, r)]
    seen["stream_records"], seen["terminal_records"] = records, terminal
    seen["submit_stream"] = d.invoke("SubmitFunction", [{"Records": terminal}])
    seen["notify"] = d.invoke("NotifyFunction", [{"Records": records}])

    d.extra_env["ReaperFunction"] = {"SKYLESS_REAPER_GRACE_SECONDS": "0"}
    stray = launch_stray(d)
    seen["stray"] = stray
    seen["reaper"] = d.invoke("ReaperFunction", [schedule_event, schedule_event])

    products = [ec2_product("us-east-1", "m5.large", "0.0960000000")]
    with FakeServer(PriceListApi(products)) as pricing:
        d.extra_env["CatalogRefreshFunction"] = {
            "SKYLESS_PRICE_CLOUDS": "aws",
            "SKYLESS_AWS_PRICING_URL": pricing.url,
        }
        seen["refresh"] = d.invoke("CatalogRefreshFunction", [schedule_event])

    # The dashboard: sign in with the key, sign out, and the session's cookie replayed after that.
    [login_page] = d.invoke(api, [d.http("GET", "/dashboard/login")])
    sign_in = page_event(d, "POST", "/dashboard/login", login_page, api_key=key, next="/dashboard")
    [signed_in] = d.invoke(api, [sign_in])
    session = [c.split(";")[0] for c in signed_in.get("cookies", []) if c.startswith("skyless_session=")]
    [home] = d.invoke(api, [with_cookies(d.http("GET", "/dashboard"), session)])
    logout = with_cookies(page_event(d, "POST", "/dashboard/logout", home), session)
    seen["signed_in_home"], seen["logout"], seen["after_logout"] = (
        home,
        *d.invoke(api, [logout, with_cookies(d.http("GET", "/dashboard"), session)]),
    )
    return seen


# -- the proof ---------------------------------------------------------------------------------------------


def test_every_function_of_the_template_is_exercised_with_each_event_type_it_declares(
    deployed: DeployedStack,
) -> None:
    declared = {
        (logical, event["Type"]) for logical, f in deployed.functions.items() for event in f.events.values()
    }
    assert declared == {
        ("ApiFunction", "HttpApi"),
        ("SubmitFunction", "SQS"),
        ("SubmitFunction", "DynamoDB"),
        ("OptimizeFunction", "SQS"),
        ("ProvisionFunction", "SQS"),
        ("SpotWatchFunction", "SQS"),
        ("NotifyFunction", "DynamoDB"),
        ("ReconcileFunction", "Schedule"),
        ("ReaperFunction", "Schedule"),
        ("CatalogRefreshFunction", "Schedule"),
    }, "a new function or event type: give it an event in `journey` and a check below"


def test_every_handler_is_the_module_attribute_lambda_would_call(deployed: DeployedStack) -> None:
    for logical, function in deployed.functions.items():
        module, _, attribute = function.handler.rpartition(".")
        source = function.code_root / (module.replace(".", "/") + ".py")
        assert source.is_file(), f"{logical}: {source} is not in the CodeUri folder"
        assert f"def {attribute}(event" in source.read_text(), f"{logical}: {function.handler} is no handler"


def test_the_api_answers_http_api_payload_2_events(journey: dict[str, Any]) -> None:
    openapi = journey["openapi"]
    assert openapi["statusCode"] == 200, openapi
    assert json.loads(openapi["body"])["openapi"].startswith("3.")
    root = journey["root"]  # the dashboard is served by the same function: `/` sends a browser there
    assert root["statusCode"] == 302 and root["headers"]["Location"].endswith("/dashboard"), root
    assert journey["unauthenticated"]["statusCode"] == 401
    assert journey["notify_on"]["statusCode"] == 200, journey["notify_on"]
    assert journey["schedule"]["statusCode"] == 201, journey["schedule"]
    assert journey["upload"]["statusCode"] == 201, journey["upload"]
    assert journey["submitted"]["statusCode"] == 201, journey["submitted"]
    assert journey["detail"]["statusCode"] == 200
    assert journey["logs"]["statusCode"] == 200, journey["logs"]
    assert journey["cancelled"]["statusCode"] == 200, journey["cancelled"]
    for answer in (journey["openapi"], journey["submitted"], journey["root"]):
        assert set(answer) <= {"statusCode", "headers", "body", "isBase64Encoded", "cookies"}


def test_signing_out_of_the_dashboard_ends_the_session_for_a_replayed_cookie(journey: dict[str, Any]) -> None:
    assert journey["signed_in_home"]["statusCode"] == 200, journey["signed_in_home"]
    logout, after = journey["logout"], journey["after_logout"]
    assert logout["statusCode"] == 303 and logout["headers"]["Location"].endswith("/dashboard/login"), logout
    assert after["statusCode"] == 303 and "why=signed_out" in after["headers"]["Location"], after


def test_an_admins_contracts_are_stored_through_the_api_role(journey: dict[str, Any]) -> None:
    assert journey["contracts_set"]["statusCode"] == 200, journey["contracts_set"]
    assert json.loads(journey["contracts_set"]["body"])["version"] == 1
    chosen = json.loads(journey["detail"]["body"])["plan"]["tasks"][0]["candidates"][0]  # optimize planned it
    assert chosen["hourly_price"] == pytest.approx(chosen["list_price"] * 0.9)


def test_the_queue_functions_report_no_failed_message(journey: dict[str, Any]) -> None:
    for step in (
        "optimize",
        "provision",
        "spot_watch",
        "after_warning",
        "relaunch",
        "teardown",
        "submit_queue",
    ):
        for answer in journey[step]:
            assert answer == {"batchItemFailures": []}, (step, answer)
    assert journey["uploads_batch"]["Records"], "the bucket's notification reached the submit queue"
    bodies = [json.loads(record["body"]) for record in journey["uploads_batch"]["Records"]]
    s3_events = [r for body in bodies for r in body.get("Records", []) if r.get("eventSource") == "aws:s3"]
    keys = [unquote(r["s3"]["object"]["key"]) for r in s3_events]  # moto URL-encodes the key's slashes
    assert len(keys) == 1 and keys[0].startswith("tasks/u-") and keys[0].endswith("/nightly.yaml"), bodies


def test_the_job_ran_on_ec2_with_the_nodes_profile_and_a_boot_credential(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    assert journey["node_profile"] == deployed.resolver.get_att("NodeInstanceProfile", "Arn")
    assert journey["config"]["statusCode"] == 200, journey["config"]
    assert json.loads(journey["config"]["body"])["run"].startswith("echo hello")
    assert journey["second_fetch"]["statusCode"] == 401, journey["second_fetch"]
    assert json.loads(journey["running"]["body"])["state"] == "RUNNING"


def test_user_data_holds_no_secret_only_the_boot_token(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    script = journey["user_data"]
    exported = {
        line.split("=", 1)[0].removeprefix("export ")
        for line in script.splitlines()
        if line.startswith("export ")
    }
    assert exported == {
        "SKYLESS_API_URL",
        "SKYLESS_JOB_ID",
        "SKYLESS_CLUSTER_ID",
        "SKYLESS_BOOT_TOKEN",
        "SKYLESS_CLOUD",
        "SKYLESS_INSTANCE_ID",
    }
    config = json.loads(journey["config"]["body"])
    assert config["envs"]["HF_TOKEN"] == "hf_secret_of_the_proof_job"  # over HTTPS, from the API
    key = deployed.client("secretsmanager").get_secret_value(SecretId=deployed.resolver.ref("AgentSecret"))
    for secret in (
        "hf_secret_of_the_proof_job",
        config["agent_token"],
        key["SecretString"],
        "X-Amz-Signature",
        "Signature=",
        config["log_upload"]["fields"]["policy"],
    ):
        assert secret not in script


def test_the_job_ended_filter_passes_terminal_state_events_only(deployed: DeployedStack) -> None:
    job_ended = deployed.functions["SubmitFunction"].events["JobEnded"]["Properties"]
    pattern = json.loads(job_ended["FilterCriteria"]["Filters"][0]["Pattern"])
    [record] = event_fixture("dynamodb_stream_state_event.json")["Records"]
    assert matches_pattern(pattern, record)
    running = copy.deepcopy(record)
    running["dynamodb"]["NewImage"]["state"]["S"] = "RUNNING"
    note = copy.deepcopy(record)
    note["dynamodb"]["NewImage"]["kind"]["S"] = "note"
    assert not matches_pattern(pattern, running) and not matches_pattern(pattern, note)


def test_the_stream_functions_answer_partial_batch_responses(journey: dict[str, Any]) -> None:
    ended = {r["dynamodb"]["NewImage"]["state"]["S"] for r in journey["terminal_records"]}
    assert ended == {"FAILED", "CANCELLED"}, "the jobs' terminal state events pass the JobEnded filter"
    assert len(journey["terminal_records"]) < len(journey["stream_records"])  # the filter filters
    assert journey["submit_stream"] == [{"batchItemFailures": []}]
    assert journey["notify"] == [{"batchItemFailures": []}]


def test_the_scheduled_functions_run_and_the_reaper_kills_only_skylesss_instances(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    replanned, relaunched = journey["replanned"], journey["relaunched"]
    assert replanned["state"] == "PLANNED" and replanned["attempt"] == 1, replanned["reason"]  # spot_watch
    assert relaunched["state"] == "SETTING_UP" and relaunched["attempt"] == 1, relaunched["reason"]
    [reconcile] = journey["reconcile"]
    assert journey["job_id"] in reconcile["actions"].get("failed", []), reconcile  # the silent on-demand node
    first, second = journey["reaper"]
    assert first["killed"] == ["job-gone-0"] and second["killed"] == [], journey["reaper"]
    assert first["failed"] == [] and second["failed"] == []
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in deployed.client("ec2").describe_instances(InstanceIds=list(journey["stray"].values()))[
            "Reservations"
        ]
        for i in r["Instances"]
    }
    assert states[journey["stray"]["ours"]] in ("shutting-down", "terminated")
    assert states[journey["stray"]["look_alike"]] == "running", "a tag anyone could add is not skyless's"
    [refresh] = journey["refresh"]
    assert isinstance(refresh, dict) and refresh, refresh


def test_no_function_writes_outside_its_home_or_imports_test_or_local_code(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    home = deployed.tmp / "lambda-home"
    assert not home.exists() or not any(home.rglob("*")), list(home.rglob("*"))


# -- each role against what its code did --------------------------------------------------------------


def _created_resources(deployed: DeployedStack, journey: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Instance and group ARNs -> the condition keys AWS would see on them (their tags at creation, the
    instance profile they were launched with): from the recorded create calls and the test's own strays."""
    arn = f"arn:aws:ec2:{deployed.settings.region}:123456789012:"
    found: dict[str, dict[str, Any]] = {}
    calls = [c for function_calls in deployed.calls.values() for c in function_calls]
    for call in calls:
        kind = {"RunInstances": "instance", "CreateSecurityGroup": "security-group"}.get(call["operation"])
        if kind is None or call["signing_name"] != "ec2":
            continue
        tags = {
            t["Key"]: t["Value"]
            for spec in call["params"].get("TagSpecifications", [])
            if spec["ResourceType"] == kind
            for t in spec["Tags"]
        }
        context = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
        profile = (call["params"].get("IamInstanceProfile") or {}).get("Arn")
        if profile:
            context["ec2:InstanceProfile"] = profile
        for resource_id in call.get("created", []):
            found[f"{arn}{kind}/{resource_id}"] = context
    stray_tags = {"aws:ResourceTag/skyless-managed": "true", "aws:ResourceTag/skyless-cluster": "job-gone-0"}
    profile = deployed.resolver.get_att("NodeInstanceProfile", "Arn")
    found[f"{arn}instance/{journey['stray']['ours']}"] = {**stray_tags, "ec2:InstanceProfile": profile}
    found[f"{arn}instance/{journey['stray']['look_alike']}"] = stray_tags
    return found


def test_each_functions_role_allows_every_aws_call_its_code_made(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    profile_roles = {
        deployed.resolver.get_att("NodeInstanceProfile", "Arn"): deployed.resolver.get_att("NodeRole", "Arn")
    }
    resources = _created_resources(deployed, journey)
    refused = []
    for logical, calls in deployed.calls.items():
        assert calls, f"{logical} made no AWS call: the journey does not exercise it"
        statements = deployed.functions[logical].statements
        for call in calls:
            for request in iam_requests(call, deployed.settings.region, profile_roles):
                if allowing_statement(statements, request, resources.get(request.resource)) is None:
                    refused.append(f"{logical}: {request.describe()}")
    assert not refused, "IAM would refuse:\n" + "\n".join(sorted(set(refused)))


def test_every_action_a_role_grants_is_one_its_code_was_seen_to_use(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    """The other direction: nothing granted "just in case". An action the journey does not reach must be
    named here with the path that needs it."""
    reached_elsewhere = {
        # failure and cleanup paths the journey does not take
        ("ProvisionFunction", "ec2:AuthorizeSecurityGroupIngress"): "a task with ports",
        ("ProvisionFunction", "ec2:DeleteSecurityGroup"): "teardown once EC2 lets the group go",
        ("ProvisionFunction", "ec2:DescribeVpcs"): "a candidate with no zone",
        ("ProvisionFunction", "sqs:SendMessage"): "a launch that waits (delayed retry) or re-plans",
        ("ProvisionFunction", "sqs:GetQueueUrl"): "a launch that waits (delayed retry) or re-plans",
        ("ProvisionFunction", "s3:GetObject"): "a task too big for its record (runs/<job>/task.json)",
        ("SpotWatchFunction", "s3:GetObject"): "a task too big for its record (runs/<job>/task.json)",
        ("ReconcileFunction", "s3:GetObject"): "a task too big for its record (runs/<job>/task.json)",
        ("ReconcileFunction", "ec2:TerminateInstances"): "an instance no record knows",
        ("ReconcileFunction", "dynamodb:BatchGetItem"): "a lost teardown of a job's second or later attempt",
        ("ReconcileFunction", "ec2:DeleteSecurityGroup"): "a leftover group",
        ("ReconcileFunction", "ec2:DescribeSecurityGroups"): "a leftover group",
        ("ReaperFunction", "ec2:DeleteSecurityGroup"): "a leftover group",
        ("ApiFunction", "scheduler:UpdateSchedule"): "pause/resume",
        ("ApiFunction", "scheduler:DeleteSchedule"): "DELETE /schedules/{name}",
        ("ApiFunction", "scheduler:GetSchedule"): "pause/resume",
        ("ApiFunction", "secretsmanager:CreateSecret"): "a Slack webhook setting",
        ("ApiFunction", "secretsmanager:PutSecretValue"): "a Slack webhook setting",
        ("ApiFunction", "secretsmanager:DeleteSecret"): "clearing a Slack webhook",
        ("ApiFunction", "ses:SendEmail"): "POST /notifications/test",
        ("ApiFunction", "dynamodb:DeleteItem"): "DELETE /schedules/{name}",
        ("NotifyFunction", "secretsmanager:GetSecretValue"): "a Slack webhook",
        ("NotifyFunction", "sqs:SendMessage"): "the on-failure destination (Lambda sends, as this role)",
        # a job is planned at submit: optimize plans only what submit could not and recovery fallbacks
        ("OptimizeFunction", "dynamodb:PutItem"): "planning a job submit could not plan (its transaction)",
        ("OptimizeFunction", "dynamodb:UpdateItem"): "planning a job submit could not plan",
        ("OptimizeFunction", "s3:GetObject"): "the refreshed catalog and a task too big for its record",
        ("OptimizeFunction", "sqs:SendMessage"): "the launch request after a plan",
        ("OptimizeFunction", "sqs:GetQueueUrl"): "the launch request after a plan",
        ("ProvisionFunction", "ec2:TerminateInstances"): "a fence or a teardown of a cluster that ran",
        # the sweep acting on a silent node (tests/integration/test_reaper_reconcile.py)
        ("ReconcileFunction", "dynamodb:GetItem"): "a silent node's job",
        ("ReconcileFunction", "dynamodb:PutItem"): "a silent node's job moved to recovery",
        ("ReconcileFunction", "dynamodb:UpdateItem"): "a silent node's job moved to recovery",
        ("ReconcileFunction", "ec2:DescribeInstances"): "what runs, against what the records say",
        ("ReconcileFunction", "ec2:DescribeRegions"): "what runs, against what the records say",
        ("ReconcileFunction", "secretsmanager:GetSecretValue"): "a recovery's new agent token",
        ("ReconcileFunction", "sqs:SendMessage"): "a stuck job's step sent again",
        ("ReconcileFunction", "sqs:GetQueueUrl"): "a stuck job's step sent again",
        # named clusters (tests/integration/test_clusters_*.py)
        ("ApiFunction", "ec2:AuthorizeSecurityGroupIngress"): "skyless ssh on a cluster on AWS",
        ("ApiFunction", "ec2:DescribeSecurityGroups"): "skyless ssh on a cluster on AWS",
        ("ApiFunction", "ec2:DescribeRegions"): "skyless ssh on a cluster on AWS",
        ("ProvisionFunction", "ec2:StopInstances"): "skyless stop (or autostop) of a cluster on AWS",
        ("ProvisionFunction", "ec2:StartInstances"): "skyless start of a cluster on AWS",
        ("ProvisionFunction", "dynamodb:DeleteItem"): "a cluster torn down gives its name back",
        ("ProvisionFunction", "dynamodb:Query"): "a cluster stopped or torn down ends its jobs",
        ("ReconcileFunction", "dynamodb:Query"): "a cluster that lost a node fails its jobs",
        # a task whose file_mounts name buckets (tests/integration/test_storage_*.py)
        ("ApiFunction", "sts:AssumeRole"): "a node's credentials scoped to its task's buckets",
        ("ProvisionFunction", "s3:CreateBucket"): "a task naming a bucket that does not exist yet",
        ("ProvisionFunction", "s3:ListBucket"): "deleting a task bucket at job end (persistent: false)",
        ("ProvisionFunction", "s3:DeleteObject"): "deleting a task bucket at job end (persistent: false)",
        ("ProvisionFunction", "s3:DeleteBucket"): "deleting a task bucket at job end (persistent: false)",
        ("SubmitFunction", "dynamodb:Query"): "an upload whose task mounts a bucket: its owner's grants",
        ("SubmitFunction", "s3:GetBucketLocation"): "an upload whose task reads a bucket: where it lives",
        ("SubmitFunction", "s3:ListBucket"): "an upload whose task reads a bucket: its listed size",
        ("SubmitFunction", "dynamodb:PutItem"): "an upload whose task reads a bucket: its place cached",
        ("ApiFunction", "s3:GetBucketLocation"): "a job reading a bucket: where it lives (data gravity)",
        (
            "ProvisionFunction",
            "s3:PutLifecycleConfiguration",
        ): "a bucket created with CheckpointExpireDays > 0",
        # the storage rule and the admin routes (tests/integration/test_tenant_walls_storage.py)
        ("ApiFunction", "dynamodb:Scan"): "skyless admin users|teams|buckets list",
        ("ApiFunction", "dynamodb:ConditionCheckItem"): "skyless admin teams add (the team must exist)",
        ("ApiFunction", "dynamodb:Query"): "a task mounting a bucket: its owner's teams and grants",
        # skyless storage delete of a bucket a job made (tests/integration/test_cli_storage.py)
        ("ApiFunction", "s3:DeleteBucket"): "skyless storage delete",
        ("ApiFunction", "s3:DeleteObject"): "skyless storage delete (the bucket is emptied first)",
    }
    used: dict[str, set[str]] = {}
    for logical, calls in deployed.calls.items():
        used[logical] = {r.action.lower() for c in calls for r in iam_requests(c, deployed.settings.region)}
    unused = []
    for logical, function in deployed.functions.items():
        for statement in function.statements:
            if statement.get("Effect") == "Deny":  # grants nothing
                continue
            for action in as_list(statement["Action"]):
                if action.lower() in used[logical] or (logical, action) in reached_elsewhere:
                    continue
                unused.append(f"{logical}: {action}")
    assert not unused, "granted, never used:\n" + "\n".join(sorted(set(unused)))


def test_a_jobs_secret_values_are_readable_by_the_api_alone_whoever_may_read_the_bucket(
    deployed: DeployedStack, journey: dict[str, Any]
) -> None:
    """The bucket policy denies reading `secrets.json` objects to every principal but the API's role (which
    serves them to a job's own agents), so a team that lets users read `runs/` does not hand them out."""
    (policy,) = [
        deployed.resolver.resolve(r["Properties"]["PolicyDocument"])
        for r in deployed.resolver.template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy"
    ]
    statements = policy["Statement"]
    readers: dict[str, list[IamRequest]] = {}
    for logical, calls in deployed.calls.items():
        for call in calls:
            for request in iam_requests(call, deployed.settings.region):
                if request.action == "s3:GetObject" and request.resource.endswith("/secrets.json"):
                    readers.setdefault(logical, []).append(request)
    assert set(readers) == {"ApiFunction"}, readers  # the journey's scheduled job has a secret

    stack_name = deployed.resolver.ref("AWS::StackName")
    secret_read = readers["ApiFunction"][0]
    for principal, denied in [
        (f"arn:aws:iam::{ACCOUNT}:role/{stack_name}-ApiFunctionRole-1A2B3C", False),
        (f"arn:aws:iam::{ACCOUNT}:role/{stack_name}-SubmitFunctionRole-1A2B3C", True),
        (f"arn:aws:iam::{ACCOUNT}:role/{stack_name}-ProvisionFunctionRole-1A2B3C", True),
        (f"arn:aws:iam::{ACCOUNT}:user/analyst", True),
        (f"arn:aws:iam::{ACCOUNT}:role/{stack_name}-NodeRole-1A2B3C", True),
    ]:
        asked = IamRequest(secret_read.action, secret_read.resource, {"aws:PrincipalArn": principal})
        assert (denying_statement(statements, asked) is not None) is denied, principal
        log = IamRequest("s3:GetObject", secret_read.resource.replace("secrets.json", "logs/0/x"),
                         {"aws:PrincipalArn": principal})  # fmt: skip
        assert denying_statement(statements, log) is None  # the rest of the bucket is the roles' business
    cluster_secret = (
        secret_read.resource.split("/runs/")[0] + "/clusters/cl-0123456789ab/jobs/00000001/secrets.json"
    )
    asked = IamRequest(
        "s3:GetObject", cluster_secret, {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:user/analyst"}
    )
    assert denying_statement(statements, asked) is not None
