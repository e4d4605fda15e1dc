"""Every AWS client of a thread comes from one botocore session: pynamodb's per-table connections, its
transaction connection and boto3's clients (a second session costs a cold start more than a client)."""

from __future__ import annotations

import threading
import uuid

from shared.aws.sessions import aws_client, boto3_session, botocore_session
from shared.config import Settings
from shared.store.models import models_for


def test_tables_transactions_and_boto3_clients_share_the_threads_session(stack: Settings) -> None:
    models = models_for(stack)
    # pynamodb's connections see the session through a wrapper asking for the cut DynamoDB model
    sessions = {id(model._get_connection().connection.session.shared) for model in models.all()}
    sessions.add(id(models.connection.session.shared))
    sessions.add(id(boto3_session()._session))
    assert sessions == {id(botocore_session())}
    assert models.jobs.count() == 0  # the shared session's clients work against the stack
    assert aws_client("sqs", stack).list_queues(QueueNamePrefix=stack.prefix)["QueueUrls"]


def test_each_thread_gets_its_own_session() -> None:
    seen: list[object] = []  # the session itself, not its id: a freed object's id can be reused
    thread = threading.Thread(target=lambda: seen.append(botocore_session()))
    thread.start()
    thread.join()
    assert seen and seen[0] is not botocore_session()


def test_the_aws_providers_ec2_clients_come_from_the_threads_session(stack: Settings) -> None:
    from shared.clouds.aws import AwsCloud
    from shared.config.clouds import AwsConfig

    cloud = AwsCloud(AwsConfig(regions=("us-east-1",), endpoint_url=stack.endpoint_url))
    client = cloud.client("us-east-1")
    assert client._endpoint.host == stack.endpoint_url
    assert cloud.session._session is botocore_session()
    # the shared session's client works (the session's moto server holds other tests' instances: filter them)
    nobody = [{"Name": "tag:skyless-test", "Values": [uuid.uuid4().hex]}]
    assert client.describe_instances(Filters=nobody)["Reservations"] == []
