"""The embedded endpoint's TransactWriteItems (local_runtime/moto_transactions.py) rolls back a failed
transaction as moto did (items and stream as before), while backing up only the items it touches."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from shared.config import Settings


def test_a_failed_transaction_leaves_items_and_stream_as_they_were(stack: Settings) -> None:
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    events = stack.table_name("events")
    jobs = stack.table_name("jobs")
    dynamodb.put_item(TableName=events, Item={"job_id": {"S": "j"}, "at": {"S": "1"}, "kind": {"S": "a"},
                                              "message": {"S": "before"}})  # fmt: skip
    streams = boto3.client("dynamodbstreams", endpoint_url=stack.endpoint_url, region_name=stack.region)
    arn = dynamodb.describe_table(TableName=events)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

    def stream_records() -> int:
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        return len(streams.get_records(ShardIterator=it["ShardIterator"])["Records"])

    before = stream_records()
    key = {"job_id": {"S": "j"}, "at": {"S": "1"}}
    update = {"TableName": events, "Key": key, "UpdateExpression": "SET message = :m",
              "ExpressionAttributeValues": {":m": {"S": "x"}}}  # fmt: skip
    new_item = {**key, "at": {"S": "2"}, "kind": {"S": "b"}, "message": {"S": "new"}}
    insert = {"TableName": events, "Item": new_item}
    absent = {"job_id": {"S": "nope"}}
    refused = {"TableName": jobs, "Item": absent, "ConditionExpression": "attribute_exists(job_id)"}
    with pytest.raises(ClientError) as failed:
        dynamodb.transact_write_items(TransactItems=[{"Update": update}, {"Put": insert}, {"Put": refused}])
    assert failed.value.response["Error"]["Code"] == "TransactionCanceledException"
    items = dynamodb.query(TableName=events, KeyConditionExpression="job_id = :j",
                           ExpressionAttributeValues={":j": {"S": "j"}})["Items"]  # fmt: skip
    assert [(i["at"]["S"], i["message"]["S"]) for i in items] == [("1", "before")]
    assert stream_records() == before  # no record of the writes that were rolled back
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": events, "Item": {"job_id": {"S": "j"}, "at": {"S": "3"},
                                                             "kind": {"S": "c"}, "message": {"S": "ok"}}}}]
    )  # fmt: skip
    assert stream_records() == before + 1
