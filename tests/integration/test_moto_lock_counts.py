"""moto's server in a process of its own (``tagpin_local.moto_process``) counts how long each
DynamoDB request waited for the lock that serializes them (``serialize_dynamodb``) and how long it
held it, with the CPU seconds it spent holding it: rows of the request counts
(``moto_server.requests_by_operation``) beside the operations, which ``bench.concurrency`` prints
(in a storm the wait is most of a DynamoDB request's wall). Other services' requests add none."""

from __future__ import annotations

import boto3
from tagpin_local.moto_process import LOCK_HELD, LOCK_WAITED, MotoProcess
from tagpin_local.moto_server import requests_by_operation
from tagpin_local.tables import create_state_table


def test_dynamodb_requests_count_their_wait_for_the_lock_and_their_hold(moto_process: MotoProcess) -> None:
    session = boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local")
    dynamodb = session.client("dynamodb", endpoint_url=moto_process.url, region_name="us-east-1")
    sqs = session.client("sqs", endpoint_url=moto_process.url, region_name="us-east-1")
    before = requests_by_operation(moto_process.url)
    create_state_table(dynamodb, "counted")
    for n in range(3):
        dynamodb.put_item(TableName="counted", Item={"pk": {"S": f"P#{n}"}, "sk": {"S": "-"}})
    sqs.create_queue(QueueName="not-counted-there")
    after = requests_by_operation(moto_process.url)

    def made(name: str) -> int:
        return after.get(name, (0, 0.0, 0.0))[0] - before.get(name, (0, 0.0, 0.0))[0]

    assert made(LOCK_WAITED) == made(LOCK_HELD) == 4  # the table's creation and the 3 puts
    assert made("DynamoDB.PutItem") == 3
    assert after[LOCK_HELD][1] > 0 and after[LOCK_HELD][2] > 0  # wall and CPU seconds holding it
