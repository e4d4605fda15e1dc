"""One botocore session per thread for every AWS client the control plane makes (botocore, boto3, pynamodb).

Each botocore session loads the endpoint rules and service models afresh: at a Lambda's cold start a
second session costs more than the first client. pynamodb would otherwise open one per table and one
for transactions, and boto3 one more. Sessions are per thread because creating clients from one session
is not thread-safe (the local dispatcher runs handlers on several threads); clients, once made, are.
Each searches shared/aws/botocore_data/ for service models too: the cut EC2 model (shared.aws.service_models).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import botocore.session

from shared.aws.service_models import DATA_PATH
from shared.config import Settings

_local = threading.local()


def botocore_session() -> botocore.session.Session:
    session = getattr(_local, "botocore", None)
    if session is None:
        session = _local.botocore = botocore.session.get_session()
        user_paths = session.get_config_variable("data_path")  # AWS_DATA_PATH still comes first
        session.set_config_variable("data_path", os.pathsep.join(filter(None, [user_paths, str(DATA_PATH)])))
    return session


def boto3_session() -> Any:  # boto3.Session; boto3 is imported only by callers that make boto3 clients
    session = getattr(_local, "boto3", None)
    if session is None:
        import boto3

        session = _local.boto3 = boto3.session.Session(botocore_session=botocore_session())
    return session


def aws_client(service: str, settings: Settings) -> Any:  # botocore clients have no static type
    """A client for `service` at the settings' region and endpoint, from this thread's session. A botocore
    client, the same as boto3's but for S3's transfer methods, which nothing here calls: importing boto3
    (and s3transfer and multiprocessing with it) is ~30 ms of a cold start's CPU."""
    return botocore_session().create_client(
        service, region_name=settings.region, endpoint_url=settings.endpoint_url
    )
