"""The deployed stack on moto for tests/integration/test_template_functions.py: the names the template's
Refs resolve to, each function run from its CodeUri folder in a fresh process as a Lambda container would,
and events in the shapes AWS sends them."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
from template_resolution import StackResolver, deployed_functions

from shared.config import Settings

EVENTS = Path(__file__).resolve().parent / "events"
CONTAINER = Path(__file__).resolve().parent / "lambda_container.py"
API_ID = "a1b2c3d4e5"


def event_fixture(name: str) -> Any:
    return json.loads((EVENTS / name).read_text())


class DeployedStack:
    """The moto stack the template's names resolve to, and a way to run each function on it."""

    def __init__(self, settings: Settings, resolver: StackResolver, tmp: Path) -> None:
        self.settings = settings
        self.resolver = resolver
        self.functions = deployed_functions(resolver)
        self.tmp = tmp
        self.calls: dict[str, list[dict[str, Any]]] = {name: [] for name in self.functions}
        self.extra_env: dict[str, dict[str, str]] = {}

    def client(self, service: str) -> Any:
        return boto3.client(
            service, endpoint_url=self.settings.endpoint_url, region_name=self.settings.region
        )

    def invoke(self, logical: str, events: list[dict[str, Any]]) -> list[Any]:
        """Run the function's Handler on `events` in a fresh process, as a Lambda container would."""
        function = self.functions[logical]
        events_file = self.tmp / f"{logical}-{uuid.uuid4().hex[:6]}-events.json"
        answers_file = events_file.with_name(events_file.name.replace("-events", "-answers"))
        events_file.write_text(json.dumps(events))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.tmp / "lambda-home"),  # what a Lambda has: nothing of ours in it
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_REGION": self.settings.region,
            "AWS_DEFAULT_REGION": self.settings.region,
            "AWS_LAMBDA_FUNCTION_NAME": f"{self.settings.prefix}-{logical}",
            "AWS_ENDPOINT_URL": str(self.settings.endpoint_url),  # the one difference from AWS: moto
            **function.environment,
            **self.extra_env.get(logical, {}),
        }
        done = subprocess.run(
            [
                sys.executable,
                str(CONTAINER),
                str(function.code_root),
                function.handler,
                str(events_file),
                str(answers_file),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, f"{logical} ({function.handler}) failed:\n{done.stderr[-4000:]}"
        result = json.loads(answers_file.read_text())
        for module, path in result["modules"].items():
            top = module.split(".")[0]
            assert top in ("functions", "shared", "node_agent"), f"{logical} imported {module}"
            assert path is None or Path(path).is_relative_to(function.code_root), (module, path)
        self.calls[logical] += result["calls"]
        return result["answers"]

    # -- events in the shapes AWS sends ----------------------------------------------------------------

    def http(
        self, method: str, path: str, *, key: str | None = None, body: Any = None, query: str = ""
    ) -> dict[str, Any]:
        """An HTTP API payload 2.0 event for the template's routes (`ANY /` or `ANY /{proxy+}`)."""
        event = copy.deepcopy(
            event_fixture("http_api_v2_root.json" if path == "/" else "http_api_v2_proxy.json")
        )
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["rawQueryString"] = query
        if path != "/":
            event["pathParameters"] = {"proxy": path.lstrip("/")}
        if key is not None:
            event["headers"]["authorization"] = f"Bearer {key}"
        if body is not None:
            text = json.dumps(body)
            event["headers"]["content-type"] = "application/json"
            event["headers"]["content-length"] = str(len(text))
            event["body"] = base64.b64encode(text.encode()).decode()  # API Gateway encodes what it may
            event["isBase64Encoded"] = True
        return event

    def sqs_batch(self, kind: str) -> dict[str, Any]:
        """Every message waiting on one of the stack's queues, as the SQS event source hands them over."""
        sqs = self.client("sqs")
        url = sqs.get_queue_url(QueueName=self.settings.queue_name(kind))["QueueUrl"]
        records = []
        for _ in range(20):
            answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
            messages = answer.get("Messages", [])
            if not messages and records:
                break
            for message in messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                record = copy.deepcopy(event_fixture("sqs_record.json"))
                record.update(
                    messageId=message["MessageId"],
                    receiptHandle=message["ReceiptHandle"],
                    body=message["Body"],
                    md5OfBody=message["MD5OfBody"],
                    attributes=message.get("Attributes", {}),
                    eventSourceARN=self.resolver.get_att(_queue_logical(self.resolver, kind), "Arn"),
                )
                records.append(record)
            if not messages:
                time.sleep(0.2)
        return {"Records": records}

    def stream_records(self) -> list[dict[str, Any]]:
        """The events table's stream from its start, as the DynamoDB event source hands it over."""
        streams = self.client("dynamodbstreams")
        arn = self.resolver.get_att("EventsTable", "StreamArn")
        records: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for record in streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]:
                stream = dict(record["dynamodb"])
                stream["ApproximateCreationDateTime"] = stream["ApproximateCreationDateTime"].timestamp()
                records.append({**record, "dynamodb": stream, "eventSourceARN": arn})
        return records


def _queue_logical(resolver: StackResolver, kind: str) -> str:
    name = resolver.parameters["Prefix"] + "-" + kind.replace("_", "-")
    for logical, resource in resolver.template["Resources"].items():
        if (
            resource["Type"] == "AWS::SQS::Queue"
            and resolver.resolve(resource["Properties"]["QueueName"]) == name
        ):
            return logical
    raise KeyError(kind)


def create_template_only_resources(settings: Settings, resolver: StackResolver) -> None:
    """What the template creates beyond create_stack: the agent-token key, the nodes' empty role and its
    instance profile; and the names only a live stack knows (stream ARN, secret ARN)."""
    prefix = settings.prefix
    secrets = boto3.client("secretsmanager", endpoint_url=settings.endpoint_url, region_name=settings.region)
    secret_name = resolver.resolve(resolver.template["Resources"]["AgentSecret"]["Properties"]["Name"])
    secret = secrets.create_secret(Name=secret_name, SecretString=uuid.uuid4().hex + uuid.uuid4().hex)
    resolver.physical["AgentSecret"] = secret["ARN"]
    iam = boto3.client("iam", endpoint_url=settings.endpoint_url, region_name=settings.region)
    role = iam.create_role(
        RoleName=f"{prefix}-NodeRole",
        AssumeRolePolicyDocument=json.dumps(
            resolver.template["Resources"]["NodeRole"]["Properties"]["AssumeRolePolicyDocument"]
        ),
    )["Role"]
    profile = iam.create_instance_profile(InstanceProfileName=f"{prefix}-NodeInstanceProfile")
    iam.add_role_to_instance_profile(
        InstanceProfileName=f"{prefix}-NodeInstanceProfile", RoleName=role["RoleName"]
    )
    resolver.physical["NodeRole"] = role["RoleName"]
    resolver.physical["NodeInstanceProfile"] = profile["InstanceProfile"]["InstanceProfileName"]
    resolver.physical["SchedulerRole"] = f"{prefix}-SchedulerRole"
    resolver.physical["StorageRole"] = f"{prefix}-StorageRole"
    resolver.physical["HttpApi"] = API_ID
    dynamodb = boto3.client("dynamodb", endpoint_url=settings.endpoint_url, region_name=settings.region)
    table = dynamodb.describe_table(TableName=settings.table_name("events"))["Table"]
    resolver.attributes[("EventsTable", "StreamArn")] = table["LatestStreamArn"]


def with_cookies(event: dict[str, Any], cookies: list[str]) -> dict[str, Any]:
    event["cookies"] = cookies  # payload 2.0 carries the Cookie header as a list
    return event


def page_event(
    d: DeployedStack, method: str, path: str, page: dict[str, Any], **fields: str
) -> dict[str, Any]:
    """A form POST of `page` (its CSRF token, and its sign-in cookie if it set one)."""
    html = base64.b64decode(page["body"]).decode() if page.get("isBase64Encoded") else page["body"]
    token = html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    event = d.http(method, path)
    body = urlencode({**fields, "csrf": token})
    event["headers"].update(
        {"content-type": "application/x-www-form-urlencoded", "content-length": str(len(body))}
    )
    event["body"] = body
    return with_cookies(event, [c.split(";")[0] for c in page.get("cookies", []) if c.startswith("skyless_")])


def with_header(event: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    event["headers"][name] = value
    return event


def exported(script: str, name: str) -> str:
    for line in script.splitlines():
        if line.startswith(f"export {name}="):
            return line.split("=", 1)[1].strip("'\"")
    raise AssertionError(f"user-data exports no {name}")


def sqs_of(d: DeployedStack, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    send(d, kind, body)
    return d.sqs_batch(kind)


def send(d: DeployedStack, kind: str, body: dict[str, Any]) -> None:
    sqs = d.client("sqs")
    url = sqs.get_queue_url(QueueName=d.settings.queue_name(kind))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))


def launch_stray(d: DeployedStack) -> dict[str, str]:
    """An instance tagged as skyless's (a job that does not exist), launched with the nodes' profile as
    provision launches; and one carrying the same tags without it: what anyone could make."""
    ec2 = d.client("ec2")
    image = ec2.describe_images(Owners=["099720109477"])["Images"][0]["ImageId"]
    tags = [
        {"Key": "skyless-managed", "Value": "true"},
        {"Key": "skyless-job", "Value": "job-gone"},
        {"Key": "skyless-cluster", "Value": "job-gone-0"},
        {"Key": "skyless-attempt", "Value": "0"},
    ]
    profile = d.resolver.get_att("NodeInstanceProfile", "Arn")
    ours = ec2.run_instances(
        ImageId=image,
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        IamInstanceProfile={"Arn": profile},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    look_alike = ec2.run_instances(
        ImageId=image,
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return {
        "ours": ours["Instances"][0]["InstanceId"],
        "look_alike": look_alike["Instances"][0]["InstanceId"],
    }
