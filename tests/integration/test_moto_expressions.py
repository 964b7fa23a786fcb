"""The local stack's moto parses each expression text once (``tagpin_local.moto_expressions``) and
answers what moto itself answers: generated sequences of UpdateItem, PutItem, DeleteItem, GetItem
and Query requests (conditions that hold and fail, ReturnValues, names that resolve to a key
attribute or to overlapping paths, texts moto refuses), sent to moto's own parsing and to the
installed one, get the same statuses and bodies, and leave the same items.

Each request is sent to moto's server app (``werkzeug``'s test client, no network) as a function
sends it: DynamoDB's JSON. A region of its own and a table deleted after each run keep other
tests' moto state apart (moto's backends are per process). Checked to fail with the patch broken:
the checks' key without the names (an update of the partition key through ``#n`` answered 200),
and one tree shared between requests instead of a fresh one (validation errors and wrong items)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from tagpin_local import moto_expressions
from werkzeug.test import Client

REGION = "eu-west-3"  # none of the other tests' moto state
TABLE = "expressions"
AUTH = (
    f"AWS4-HMAC-SHA256 Credential=local/20261127/{REGION}/dynamodb/aws4_request, "
    "SignedHeaders=host, Signature=0"
)
CLIENT = Client(DomainDispatcherApplication(create_backend_app))

type Request = tuple[str, dict[str, Any]]

NAMES = ["a", "b", "m", "pk", "sk", "trigger"]  # trigger: a reserved word; pk, sk: the key
PKS, SKS = ["p0", "p1"], ["s0", "s1", "s2"]
UPDATES = [
    "SET a = :v",
    "SET #n = :v",
    "SET #n = :v REMOVE b",
    "SET a = :v, b = :w REMOVE #n",
    "SET b = if_not_exists(b, :z) + :one",
    "SET m = if_not_exists(m, :empty)",
    "SET m.#n = :v",
    "REMOVE m.#n",
    "ADD c :one",
    "SET a = :v, #n = :w",  # overlapping when #n is a
    "SET a = :v SET b = :w",  # two SET clauses: refused
    "SET #n = :v, #o = :w",  # overlapping when #n and #o name the same
    "SET pk = :v",  # a key attribute: refused
    "SET a = :undefined",  # a value not given: refused
]
CONDITIONS = [
    None,
    "attribute_not_exists(pk)",
    "attribute_exists(pk)",
    "a = :v",
    "a <> :v OR attribute_not_exists(a)",
    "(#n = :w AND b < :one) OR attribute_not_exists(#n)",
    "size(m) < :one",
    "begins_with(a, :v)",
    "a IN (:v, :w)",
    "NOT attribute_exists(b)",
    "a BETWEEN :v AND :w",
]
RETURNS = ["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"]
strings = st.sampled_from(["x", "y", "xy", ""])


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


@st.composite
def expression_request(draw: st.DrawFn, kind: str) -> Request:
    """A write with a generated expression, condition and names; only the names and values each
    text uses are sent (DynamoDB refuses others)."""
    update = draw(st.sampled_from(UPDATES)) if kind == "UpdateItem" else ""
    condition = draw(st.sampled_from(CONDITIONS))
    text = update + " " + (condition or "")
    names = {"#n": draw(st.sampled_from(NAMES)), "#o": draw(st.sampled_from(NAMES))}
    values = {
        ":v": {"S": draw(strings)},
        ":w": {"S": draw(strings)},
        ":z": {"N": "0"},
        ":one": {"N": draw(st.sampled_from(["1", "2"]))},
        ":empty": {"M": {}},
    }
    body: dict[str, Any] = {
        "TableName": TABLE,
        "Key": _key(draw(st.sampled_from(PKS)), draw(st.sampled_from(SKS))),
    }
    if kind == "UpdateItem":
        body |= {"UpdateExpression": update, "ReturnValues": draw(st.sampled_from(RETURNS))}
    elif kind == "PutItem":
        item = body.pop("Key") | {"a": {"S": draw(strings) or "z"}, "m": {"M": {"x": {"S": "1"}}}}
        body |= {"Item": item, "ReturnValues": draw(st.sampled_from(["NONE", "ALL_OLD"]))}
    if condition is not None:
        body["ConditionExpression"] = condition
    used_names = {k: v for k, v in names.items() if k in text}
    used_values = {k: v for k, v in values.items() if k in text}
    if used_names:
        body["ExpressionAttributeNames"] = used_names
    if used_values:
        body["ExpressionAttributeValues"] = used_values
    return kind, body


def read_request(kind: str, pk: str, sk: str, value: str) -> Request:
    if kind == "GetItem":
        return kind, {"TableName": TABLE, "Key": _key(pk, sk), "ConsistentRead": True}
    return kind, {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :s)",
        "FilterExpression": "attribute_not_exists(a) OR a <> :v",
        "ExpressionAttributeValues": {":pk": {"S": pk}, ":s": {"S": "s"}, ":v": {"S": value}},
    }


requests = st.lists(
    st.one_of(
        expression_request("UpdateItem"),
        expression_request("PutItem"),
        expression_request("DeleteItem"),
        st.builds(
            read_request,
            st.sampled_from(["GetItem", "Query"]),
            st.sampled_from(PKS),
            st.sampled_from(SKS),
            strings,
        ),
    ),
    min_size=1,
    max_size=25,
)


def call(kind: str, body: dict[str, Any]) -> tuple[int, Any]:
    """moto's answer; an error moto raises (its server answers 500) as (500, the error)."""
    try:
        answer = CLIENT.post(
            "/",
            data=json.dumps(body),
            headers={
                "X-Amz-Target": f"DynamoDB_20120810.{kind}",
                "Content-Type": "application/x-amz-json-1.0",
                "Authorization": AUTH,
            },
        )
    except Exception as error:  # e.g. moto's size() of a missing attribute: ValueError
        return 500, repr(error)
    return answer.status_code, json.loads(answer.get_data() or b"{}")


def answers(sequence: list[Request]) -> tuple[list[tuple[int, Any]], Any]:
    """What moto answers to ``sequence`` on a new table, and the items it leaves."""
    table = {
        "TableName": TABLE,
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    assert call("CreateTable", table)[0] == 200
    try:
        got = [call(kind, body) for kind, body in sequence]
        status, scanned = call("Scan", {"TableName": TABLE})
        assert status == 200
        return got, sorted(scanned["Items"], key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
    finally:
        call("DeleteTable", {"TableName": TABLE})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=requests)
def test_parsed_once_answers_what_moto_answers(sequence: list[Request]) -> None:
    assert moto_expressions.install()
    with moto_expressions.as_is():
        expected = answers(sequence)
    assert answers(sequence) == expected


def test_a_check_passed_with_some_names_still_fails_with_others() -> None:
    """The key's checks ran once per text *and names*: ``SET #n = :v`` passed with ``#n`` = a is
    refused with ``#n`` = pk (moto: "Cannot update attribute pk")."""
    assert moto_expressions.install()

    def update(name: str) -> Request:
        return "UpdateItem", {
            "TableName": TABLE,
            "Key": _key("p0", "s0"),
            "UpdateExpression": "SET #n = :v",
            "ExpressionAttributeNames": {"#n": name},
            "ExpressionAttributeValues": {":v": {"S": "x"}},
        }

    got, _items = answers([update("a"), update("pk"), update("a")])
    assert [status for status, _body in got] == [200, 400, 200]
    assert "Cannot update attribute pk" in got[1][1]["message"]


def test_an_update_expression_is_parsed_once_per_text() -> None:
    """What the module is for: the second request with a text does not parse it again."""
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    assert moto_expressions.install()
    parsed: list[str] = []
    parse = UpdateExpressionParser._parse

    def counting(self: Any) -> Any:
        parsed.append("once")
        return parse(self)

    UpdateExpressionParser._parse = counting
    try:
        text = "SET a = :v, b = :w REMOVE c, d"  # a text no other test sends
        body = {"UpdateExpression": text, "ExpressionAttributeValues": {":v": {"S": "1"}, ":w": {"S": "2"}}}
        answers([("UpdateItem", {"TableName": TABLE, "Key": _key("p0", f"s{n}")} | body) for n in range(3)])
    finally:
        UpdateExpressionParser._parse = parse
    assert len(parsed) == 1
