"""Replays DynamoDB request sequences through stock moto and then through
moto with moto_serial.py's patches loaded, in one interpreter, and exits 1
when any answer differs (status, body, or an exception moto raised).

Usage: launcher_answers_as_moto.py PATH/TO/moto_serial.py

The launcher's changes to moto (caches, a cheaper rollback copy for
TransactWriteItems, its own JSON writer, the unsorted Query read) are only
safe while every answer is moto's own; the project's conditional-write
tests prove their behaviour against moto through this launcher. Each
sequence runs on a fresh backend and ends with reads of every table
(Scan, GetItem, GSI and table Query, DescribeTable's item count), so a
transaction whose rollback left a different table shows up even when its
own answer matched. The patched side runs the sequences one after another
in one interpreter, so its expression caches answer strings they first
saw in earlier sequences, with other names, values and items.
"""
import json
import sys

from botocore.awsrequest import AWSPreparedRequest
import moto.dynamodb.models as dynamodb_models
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.responses import DynamoHandler

URL = "http://127.0.0.1:5000/"
HEADERS = {
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x",
    "Host": "127.0.0.1:5000",
}
# Fields of a table description that name the moment it was made.
CLOCK_FIELDS = {"CreationDateTime", "LatestStreamLabel", "LatestStreamArn",
                "LastIncreaseDateTime", "LastDecreaseDateTime",
                "LastUpdateToPayPerRequestDateTime", "StreamArn"}


def call(op, body):
    h = dict(HEADERS)
    h["X-Amz-Target"] = "DynamoDB_20120810." + op
    raw = json.dumps(body).encode()
    req = AWSPreparedRequest("POST", URL, h, raw, False)
    try:
        status, _, content = DynamoHandler.dispatch(req, URL, h)
    except Exception as e:  # the launcher answers these as a 500 naming them
        return ("raised", type(e).__name__, str(e))
    if isinstance(content, bytes):
        content = content.decode()
    # Compared as JSON: the launcher writes a plain result's keys in the
    # order moto built them, moto's serializer in its output shape's order,
    # and no client reads an object's key order.
    try:
        content = json.loads(content)
    except ValueError:
        return (int(status), content)
    if op in ("CreateTable", "DescribeTable", "DeleteTable", "UpdateTable"):
        content = _without_clock(content)
    return (int(status), content)


def _without_clock(v):
    if isinstance(v, dict):
        return {k: _without_clock(x) for k, x in v.items() if k not in CLOCK_FIELDS}
    if isinstance(v, list):
        return [_without_clock(x) for x in v]
    return v


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def table(name, keys, attrs, gsis=(), stream=False):
    body = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": t} for a, t in attrs],
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in zip(keys, ("HASH", "RANGE"))],
    }
    if gsis:
        body["GlobalSecondaryIndexes"] = [{
            "IndexName": n,
            "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in zip(ks, ("HASH", "RANGE"))],
            "Projection": {"ProjectionType": "ALL"},
        } for n, ks in gsis]
    if stream:
        body["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return ("CreateTable", body)


def put(t, item, **kw):
    return ("PutItem", dict(TableName=t, Item=item, **kw))


def upd(t, key, expr, **kw):
    return ("UpdateItem", dict(TableName=t, Key=key, UpdateExpression=expr, **kw))


def tx(*ops, **kw):
    return ("TransactWriteItems", dict(TransactItems=[{k: v} for k, v in ops], **kw))


def tput(t, item, **kw):
    return ("Put", dict(TableName=t, Item=item, **kw))


def tupd(t, key, expr, **kw):
    return ("Update", dict(TableName=t, Key=key, UpdateExpression=expr, **kw))


def tdel(t, key, **kw):
    return ("Delete", dict(TableName=t, Key=key, **kw))


def tcheck(t, key, cond, **kw):
    return ("ConditionCheck", dict(TableName=t, Key=key, ConditionExpression=cond, **kw))


def nested(pk, state, n):
    return {"pk": S(pk), "state": S(state), "n": N(n),
            "m": {"M": {"a": {"M": {"b": S("deep"), "c": {"L": [N(1), N(2)]}}}, "status": S("x")}},
            "l": {"L": [S("zero"), {"M": {"k": S("v")}}, {"L": [N(7)]}]},
            "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "flag": {"BOOL": True},
            "nul": {"NULL": True}, "tags": {"L": [S("t1")]}, "u": S("ünïcode ✓")}


# Tables: H hash-only (a GSI on state), R hash and range (a GSI on g and
# sk), NUM a number hash key, ST a hash-only table with a stream (copied
# whole by the launcher's transaction rollback).
ITEMS = [("H", nested("h%d" % i, "open" if i % 2 else "done", i)) for i in range(5)] + [
    ("R", {"pk": S("r%d" % (i // 3)), "sk": S("s%d" % (i % 3)), "g": S("g%d" % (i % 2)),
           "v": N(i), "m": {"M": {"x": {"L": [N(i)]}}}}) for i in range(9)
] + [("NUM", {"id": N(i), "v": S("n%d" % i)}) for i in (1, 2, 10)] + [("ST", {"pk": S("s1"), "v": N(1)})]
SETUP = [
    table("H", ["pk"], [("pk", "S"), ("state", "S"), ("n", "N")], gsis=[("by_state", ["state", "n"])]),
    table("R", ["pk", "sk"], [("pk", "S"), ("sk", "S"), ("g", "S")], gsis=[("by_g", ["g", "sk"])]),
    table("NUM", ["id"], [("id", "N")]),
    table("ST", ["pk"], [("pk", "S")], stream=True),
    ("BatchWriteItem", {"RequestItems": {t: [{"PutRequest": {"Item": i}} for tt, i in ITEMS if tt == t]
                                         for t in ("H", "R", "NUM", "ST")}}),
]


def reads():
    # What a rollback could leave wrong: every item of every table, and
    # the GSI reads a worker's queries make.
    return [("Scan", {"TableName": t, "ConsistentRead": True}) for t in ("H", "R", "NUM", "ST")] + [
        ("Query", {"TableName": "H", "IndexName": "by_state", "KeyConditionExpression": "#s = :s",
                   "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":s": S("open")}}),
        ("Query", {"TableName": "R", "IndexName": "by_g", "KeyConditionExpression": "g = :g",
                   "ExpressionAttributeValues": {":g": S("g0")}}),
    ]


FAIL = "attribute_not_exists(pk)"  # true of no item that exists
H0, H1, H2, H3 = ({"pk": S("h%d" % i)} for i in range(4))
R00, R01, R12 = {"pk": S("r0"), "sk": S("s0")}, {"pk": S("r0"), "sk": S("s1")}, {"pk": S("r1"), "sk": S("s2")}
NESTED_SET = "SET m.a.b = :v, l[0] = :v, m.a.c[1] = :n, #st = :s ADD ss :ss, n :one REMOVE flag, l[2]"
NESTED_VALUES = {":v": S("changed"), ":n": N(99), ":s": S("moved"), ":ss": {"SS": ["c"]}, ":one": N(1)}

CASES = {
    "cancelled put of a new item, hash-only table": [
        tx(tput("H", nested("new1", "open", 50)), tcheck("H", H0, FAIL)),
    ],
    "cancelled put of a new item, hash and range table": [
        tx(tput("R", {"pk": S("r9"), "sk": S("s0"), "g": S("g0")}), tcheck("R", R00, FAIL)),
        tx(tput("R", {"pk": S("r0"), "sk": S("s9"), "g": S("g1")}), tcheck("R", R01, FAIL)),
    ],
    "cancelled put replacing an existing item": [
        tx(tput("H", {"pk": S("h1"), "state": S("moved"), "n": N(1)}), tcheck("H", H0, FAIL)),
        tx(tput("R", {"pk": S("r0"), "sk": S("s0"), "g": S("g1")}), tcheck("R", R12, FAIL)),
    ],
    "cancelled deletes": [
        tx(tdel("H", H1), tdel("R", R00), tdel("NUM", {"id": N(2)}), tcheck("H", H0, FAIL)),
    ],
    "cancelled nested update of maps, lists and sets": [
        tx(tupd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"},
                ExpressionAttributeValues=NESTED_VALUES), tcheck("H", H0, FAIL)),
        tx(tupd("R", R01, "SET m.x[0] = :v, g = :g ADD c :one", ExpressionAttributeValues={
            ":v": N(5), ":g": S("g9"), ":one": N(1)}), tcheck("H", H0, FAIL)),
    ],
    "cancelled update that creates its item": [
        tx(tupd("H", {"pk": S("new2")}, "SET #st = :s, n = :one",
                ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues={":s": S("open"), ":one": N(1)}),
           tupd("R", {"pk": S("r9"), "sk": S("s0")}, "SET g = :g", ExpressionAttributeValues={":g": S("g0")}),
           tcheck("R", R00, FAIL)),
    ],
    "one table named several times, cancelled by the last": [
        tx(tput("H", nested("new1", "done", 7)), tupd("H", H1, "SET n = n + :one", ExpressionAttributeValues={":one": N(1)}),
           tdel("H", H2), tupd("H", H3, "REMOVE m.a.b"), tcheck("H", H0, FAIL)),
    ],
    "cancelled by a check on a missing item, every kind of write": [
        tx(tput("H", nested("new1", "open", 9)), tupd("R", R12, "SET v = :v", ExpressionAttributeValues={":v": N(0)}),
           tdel("NUM", {"id": N(10)}), tcheck("R", {"pk": S("zz"), "sk": S("zz")}, "attribute_exists(pk)")),
    ],
    "committed transaction then reads": [
        tx(tput("H", nested("new1", "open", 9)), tupd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"},
                                                     ExpressionAttributeValues=NESTED_VALUES),
           tdel("R", R00), tcheck("H", H0, "attribute_exists(pk)")),
        tx(tupd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues=NESTED_VALUES),
           tcheck("H", H0, FAIL)),
    ],
    "conditional failures with their old items": [
        tx(tupd("H", H1, "SET n = :v", ConditionExpression="#st = :x", ExpressionAttributeNames={"#st": "state"},
                ExpressionAttributeValues={":v": N(0), ":x": S("nope")}, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
           tput("R", {"pk": S("r0"), "sk": S("s0")}, ConditionExpression=FAIL, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
           tdel("H", H2, ConditionExpression="size(l) > :n", ExpressionAttributeValues={":n": N(1)})),
    ],
    "validation error mid-transaction (key without its range)": [
        tx(tupd("H", H1, "SET n = :v", ExpressionAttributeValues={":v": N(0)}), tdel("R", {"pk": S("r0")})),
        tx(tdel("H", H2), tcheck("R", {"pk": S("r0")}, "attribute_exists(pk)")),
    ],
    "two operations on one item": [
        tx(tupd("H", H1, "SET n = :v", ExpressionAttributeValues={":v": N(0)}), tdel("H", H1)),
        tx(tput("R", {"pk": S("r0"), "sk": S("s0"), "g": S("g1")}), tcheck("R", R00, "attribute_exists(pk)")),
    ],
    "update of a key attribute mid-transaction": [
        tx(tdel("H", H2), tupd("H", H1, "SET pk = :v", ExpressionAttributeValues={":v": S("other")})),
        tx(tdel("H", H2), tupd("R", R00, "SET sk = :v", ExpressionAttributeValues={":v": S("other")})),
    ],
    "update errors mid-transaction": [
        tx(tdel("H", H2), tupd("H", H1, "SET l = list_append(nope, :v)", ExpressionAttributeValues={":v": {"L": []}})),
        tx(tdel("H", H2), tupd("H", H1, "SET n = n + :v", ExpressionAttributeValues={":v": S("x")})),
        tx(tdel("H", H2), tupd("H", H1, "ADD ss :v", ExpressionAttributeValues={":v": {"NS": ["1"]}})),
        tx(tdel("H", H2), tupd("H", H1, "SET a = :v, a.b = :v", ExpressionAttributeValues={":v": N(1)})),
        tx(tdel("H", H2), tupd("H", H1, "SET a = :v", ExpressionAttributeValues={":w": N(1)})),
        tx(tdel("H", H2), tupd("H", H1, "SET a = ")),
        tx(tdel("H", H2), tupd("H", H1, "SET #a = :v", ExpressionAttributeValues={":v": N(1)})),
    ],
    "transaction on a table with a stream": [
        tx(tput("ST", {"pk": S("s2")}), tupd("ST", {"pk": S("s1")}, "SET v = :v", ExpressionAttributeValues={":v": N(2)}),
           tput("H", nested("new1", "open", 1)), tcheck("H", H0, FAIL)),
        tx(tput("ST", {"pk": S("s3")}), tupd("ST", {"pk": S("s1")}, "SET v = :v", ExpressionAttributeValues={":v": N(3)})),
    ],
    "transaction naming a missing table": [
        tx(tput("H", nested("new1", "open", 1)), tput("NOPE", {"pk": S("x")})),
        tx(tput("H", nested("new1", "open", 1)), tcheck("NOPE", {"pk": S("x")}, "attribute_exists(pk)")),
    ],
    "number keys spelt differently": [
        tx(tupd("NUM", {"id": N("1.0")}, "SET v = :v", ExpressionAttributeValues={":v": S("one")}),
           tdel("NUM", {"id": N("2e0")}), tcheck("H", H0, FAIL)),
        tx(tupd("NUM", {"id": N("10.00")}, "SET v = :v", ExpressionAttributeValues={":v": S("ten")})),
    ],
    "malformed key values in a transaction": [
        tx(tdel("H", H1), tcheck("NUM", {"id": N("abc")}, "attribute_exists(id)")),
        tx(tdel("H", H1), tdel("H", {"pk": {}})),
        tx(tdel("H", H1), tdel("H", {"pk": {"S": ["a"]}})),
        tx(tdel("H", H1), tdel("H", {"pk": "h2"})),
        tx(tdel("H", H1), tdel("H", {"pk": {"L": [{}]}})),
        tx(tdel("H", H1), tdel("H", {"pk": N(1)})),
        tx(tdel("H", H1), tput("NUM", {"id": N("x1")})),
        tx(tdel("H", H1), tdel("R", {"sk": S("s0")})),
    ],
    "malformed transaction items": [
        ("TransactWriteItems", {"TransactItems": [{"Delete": {"TableName": "H", "Key": H1}}, {}]}),
        ("TransactWriteItems", {"TransactItems": [{"Delete": {"TableName": "H", "Key": H1},
                                                   "Put": {"TableName": "H", "Item": {"pk": S("h9")}}}]}),
        ("TransactWriteItems", {"TransactItems": [{"Delete": {"TableName": "H", "Key": H1}},
                                                  {"Fly": {"TableName": "H", "Key": H2}}]}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": "H", "Item": {"pk": S("h1")},
                                                           "Key": {"pk": S("h2")}}},
                                                  {"ConditionCheck": {"TableName": "H", "Key": H0,
                                                                      "ConditionExpression": FAIL}}]}),
    ],
    "one update expression with other names and values": [
        upd("H", H1, "SET #a = :v", ExpressionAttributeNames={"#a": "x"}, ExpressionAttributeValues={":v": N(1)}, ReturnValues="ALL_NEW"),
        upd("H", H2, "SET #a = :v", ExpressionAttributeNames={"#a": "m"}, ExpressionAttributeValues={":v": {"M": {"q": S("r")}}}, ReturnValues="UPDATED_OLD"),
        upd("H", H3, "SET #a = :v", ExpressionAttributeNames={"#a": "state"}, ExpressionAttributeValues={":v": S("moved")}, ReturnValues="ALL_OLD"),
        upd("H", H3, "SET #a = :v", ExpressionAttributeNames={"#b": "state"}, ExpressionAttributeValues={":v": S("moved")}),
        upd("H", H3, "SET #a = :v", ExpressionAttributeValues={":v": S("moved")}),
        upd("H", H3, "SET #a = :v", ExpressionAttributeNames={"#a": "pk"}, ExpressionAttributeValues={":v": S("moved")}),
        upd("R", R12, "SET #a = :v", ExpressionAttributeNames={"#a": "g"}, ExpressionAttributeValues={":v": S("g0")}, ReturnValues="UPDATED_NEW"),
        upd("H", {"pk": S("new1")}, "SET #a = :v", ExpressionAttributeNames={"#a": "state"}, ExpressionAttributeValues={":v": S("open")}, ReturnValues="ALL_NEW"),
        upd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues=NESTED_VALUES, ReturnValues="ALL_NEW"),
        upd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues=NESTED_VALUES, ReturnValues="ALL_NEW"),
        upd("H", H2, NESTED_SET, ExpressionAttributeNames={"#st": "n"}, ExpressionAttributeValues=dict(NESTED_VALUES, **{":s": N(3)}), ReturnValues="UPDATED_OLD"),
        upd("H", H3, "SET l = list_append(l, :v), tags = list_append(:v, tags), c = if_not_exists(c, :z) + :one",
            ExpressionAttributeValues={":v": {"L": [S("x")]}, ":z": N(0), ":one": N(1)}, ReturnValues="ALL_NEW"),
        upd("H", H3, "SET l = list_append(l, :v), tags = list_append(:v, tags), c = if_not_exists(c, :z) + :one",
            ExpressionAttributeValues={":v": {"L": [N(2)]}, ":z": N(5), ":one": N(2)}, ReturnValues="ALL_NEW"),
        upd("H", H3, "SET a = b", ReturnValues="ALL_NEW"),
        upd("H", H3, "SET a = u, m2 = m REMOVE m.a", ReturnValues="ALL_NEW"),
        upd("H", H3, "SET m2.a.b = :v", ExpressionAttributeValues={":v": S("m2 only")}, ReturnValues="ALL_NEW"),
        upd("H", H3, "DELETE ss :d ADD ns :n", ExpressionAttributeValues={":d": {"SS": ["a", "zz"]}, ":n": {"NS": ["5"]}}, ReturnValues="ALL_NEW"),
        upd("H", H3, "ADD ss :d", ExpressionAttributeValues={":d": {"SS": []}}),
        upd("H", H3, "  SET   n=n+:one  ", ExpressionAttributeValues={":one": N(1)}, ReturnValues="ALL_NEW"),
        upd("H", H3, "SET n = n - :one", ExpressionAttributeValues={":one": N(1)}, ReturnValues="UPDATED_NEW"),
        upd("H", H3, "REMOVE l[0], l[5], nope", ReturnValues="ALL_NEW"),
        upd("H", H3, "set status = :v", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H3, "SET a = :v SET b = :v", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H3, ""),
    ],
    "update expressions that fail to parse, asked twice": [
        upd("H", H1, "SET a = ", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "SET a = ", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "SET a = :v,", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "SET a = :v,", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "SET a[x] = :v", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "SET a[x] = :v", ExpressionAttributeValues={":v": N(1)}),
        upd("H", H1, "FLY a", ExpressionAttributeValues={":v": N(1)}),
        tx(tupd("H", H1, "FLY a")),
        tx(tupd("H", H1, "FLY a")),
        upd("H", H1, "SET a = :v", ExpressionAttributeValues={":v": N(1)}, ReturnValues="ALL_NEW"),
    ],
    "condition expressions: functions, IN, BETWEEN, size, nesting": [
        put("H", {"pk": S("h1"), "state": S("open"), "n": N(3)}, ConditionExpression="attribute_exists(pk) AND #s IN (:a, :b)",
            ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues={":a": S("open"), ":b": S("done")}, ReturnValues="ALL_OLD"),
        put("H", {"pk": S("h1"), "state": S("open"), "n": N(3)}, ConditionExpression="attribute_exists(pk) AND #s IN (:a, :b)",
            ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues={":a": S("x"), ":b": S("y")}),
        put("H", {"pk": S("h1"), "state": S("open"), "n": N(3)}, ConditionExpression="attribute_exists(pk) AND #s IN (:a, :b)",
            ExpressionAttributeNames={"#s": "n"}, ExpressionAttributeValues={":a": N(3), ":b": N(4)}),
        upd("H", H2, "SET n = :v", ConditionExpression="n BETWEEN :lo AND :hi", ExpressionAttributeValues={":v": N(0), ":lo": N(1), ":hi": N(2)}),
        upd("H", H2, "SET n = :v", ConditionExpression="n BETWEEN :lo AND :hi", ExpressionAttributeValues={":v": N(0), ":lo": N(2), ":hi": N(9)}, ReturnValues="ALL_NEW"),
        upd("H", H3, "SET n = :v", ConditionExpression="size(l) = :n AND size(m.a.c) < :n AND begins_with(u, :p)",
            ExpressionAttributeValues={":v": N(0), ":n": N(3), ":p": S("ün")}, ReturnValues="UPDATED_NEW"),
        upd("H", H3, "SET n = :v", ConditionExpression="contains(ss, :c) OR contains(tags, :c) AND NOT attribute_type(n, :t)",
            ExpressionAttributeValues={":v": N(1), ":c": S("t1"), ":t": S("S")}),
        upd("H", H3, "SET n = :v", ConditionExpression="(m.a.b = :b) AND (l[0] <> :b) AND m.#st = :x",
            ExpressionAttributeNames={"#st": "status"}, ExpressionAttributeValues={":v": N(2), ":b": S("deep"), ":x": S("x")}),
        upd("H", H3, "SET n = :v", ConditionExpression="m.status = :x", ExpressionAttributeValues={":v": N(2), ":x": S("x")}),
        upd("H", H3, "SET n = :v", ConditionExpression="n === :v", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="n === :v", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="n = :w", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="#x = :v", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="((n = :v))", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="n = :v AND", ExpressionAttributeValues={":v": N(2)}),
        upd("H", H3, "SET n = :v", ConditionExpression="size(l) > :v", ExpressionAttributeValues={":v": N(2)}, ReturnValues="ALL_OLD"),
        ("DeleteItem", {"TableName": "H", "Key": H1, "ConditionExpression": "attribute_not_exists(pk) OR n > :z",
                        "ExpressionAttributeValues": {":z": N(100)}, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}),
        ("DeleteItem", {"TableName": "H", "Key": H1, "ConditionExpression": "attribute_not_exists(pk) OR n > :z",
                        "ExpressionAttributeValues": {":z": N(0)}, "ReturnValues": "ALL_OLD"}),
        tx(tput("H", {"pk": S("h4")}, ConditionExpression="#s IN (:a, :b)", ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={":a": S("x"), ":b": S("y")}), tdel("H", {"pk": S("h5")})),
        tx(tput("H", {"pk": S("h4")}, ConditionExpression="#s IN (:a, :b)", ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={":a": S("done"), ":b": S("open")}), tdel("H", {"pk": S("h5")})),
    ],
    "reads with filters and pages": [
        ("Scan", {"TableName": "H", "FilterExpression": "n BETWEEN :a AND :b AND attribute_exists(m.a)",
                  "ExpressionAttributeValues": {":a": N(1), ":b": N(4)}}),
        ("Scan", {"TableName": "H", "FilterExpression": "n BETWEEN :a AND :b AND attribute_exists(m.a)",
                  "ExpressionAttributeValues": {":a": N(3), ":b": N(9)}, "Limit": 2}),
        ("Scan", {"TableName": "R", "Limit": 4, "ExclusiveStartKey": {"pk": S("r0"), "sk": S("s1")}}),
        ("Query", {"TableName": "R", "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
                   "FilterExpression": "v > :v", "ExpressionAttributeValues": {":p": S("r1"), ":s": S("s"), ":v": N(3)}}),
        ("Query", {"TableName": "H", "IndexName": "by_state", "KeyConditionExpression": "#s = :s AND n > :n", "Limit": 1,
                   "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":s": S("open"), ":n": N(1)}}),
        ("Query", {"TableName": "H", "IndexName": "by_state", "KeyConditionExpression": "#s = :s AND n > :n",
                   "ExclusiveStartKey": {"pk": S("h3"), "state": S("open"), "n": N(3)},
                   "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":s": S("open"), ":n": N(1)}}),
        ("Query", {"TableName": "H", "KeyConditionExpression": "pk = :p", "ProjectionExpression": "m.a.c[1], l[2], #s",
                   "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":p": S("h1")}}),
        ("BatchGetItem", {"RequestItems": {"H": {"Keys": [H0, H1, {"pk": S("nope")}]}, "R": {"Keys": [R00, R12]}}}),
        ("TransactGetItems", {"TransactItems": [{"Get": {"TableName": "H", "Key": H1}}, {"Get": {"TableName": "R", "Key": R00}}]}),
    ],
    "GSI after a cancelled move between index keys": [
        tx(tupd("H", H1, "SET #s = :s, n = :n", ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={":s": S("moved"), ":n": N(0)}),
           tupd("R", R00, "SET g = :g", ExpressionAttributeValues={":g": S("g9")}),
           tupd("R", R12, "REMOVE g"), tcheck("H", H0, FAIL)),
        tx(tupd("H", H2, "SET #s = :s", ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues={":s": S("moved")}),
           tupd("R", R01, "SET g = :g", ExpressionAttributeValues={":g": S("g9")})),
    ],
    # moto can leave two attributes of an item holding one set (a value
    # placeholder used twice); its rollback copies every item of the table,
    # which parts them, so a later ADD changes one or both depending on
    # whether a transaction on another item of the table was cancelled.
    "attributes sharing a set, then a transaction on other items cancelled": [
        upd("H", H3, "SET a = :s, b = :s, m.a.s = :n, l[1].s = :n",
            ExpressionAttributeValues={":s": {"SS": ["x"]}, ":n": {"NS": ["1"]}}),
        upd("H", {"pk": S("h4")}, "SET m2 = :m, m3 = :m", ExpressionAttributeValues={":m": {"M": {"s": {"SS": ["x"]}}}}),
        upd("R", R12, "SET a = :s, b = :s", ExpressionAttributeValues={":s": {"SS": ["x"]}}),
        upd("R", R00, "SET a = :s, b = :s", ExpressionAttributeValues={":s": {"SS": ["x"]}}),
        tx(tupd("H", H1, "SET n = :v", ExpressionAttributeValues={":v": N(0)}),
           tupd("R", R00, "ADD a :y", ExpressionAttributeValues={":y": {"SS": ["y"]}}), tcheck("H", H0, FAIL)),
        upd("H", H3, "ADD a :y, m.a.s :z", ExpressionAttributeValues={":y": {"SS": ["y"]}, ":z": {"NS": ["2"]}}, ReturnValues="ALL_NEW"),
        upd("H", {"pk": S("h4")}, "ADD m2.s :y", ExpressionAttributeValues={":y": {"SS": ["y"]}}, ReturnValues="ALL_NEW"),
        upd("R", R12, "DELETE a :x", ExpressionAttributeValues={":x": {"SS": ["x"]}}, ReturnValues="ALL_NEW"),
        upd("R", R00, "ADD a :z", ExpressionAttributeValues={":z": {"SS": ["z"]}}, ReturnValues="ALL_NEW"),
    ],
    "writes after a cancelled transaction": [
        tx(tupd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues=NESTED_VALUES),
           tupd("R", R01, "SET m.x[0] = :v", ExpressionAttributeValues={":v": N(5)}), tcheck("H", H0, FAIL)),
        upd("H", H1, NESTED_SET, ExpressionAttributeNames={"#st": "state"}, ExpressionAttributeValues=NESTED_VALUES, ReturnValues="ALL_OLD"),
        upd("R", R01, "SET m.x[0] = :v", ExpressionAttributeValues={":v": N(6)}, ReturnValues="ALL_OLD"),
        put("H", {"pk": S("h0"), "n": N(1)}, ReturnValues="ALL_OLD"),
        ("DeleteItem", {"TableName": "R", "Key": R12, "ReturnValues": "ALL_OLD"}),
        tx(tput("H", {"pk": S("h0"), "n": N(2)}), tdel("H", H2), tcheck("H", {"pk": S("h0")}, "n = :one",
                                                                          ExpressionAttributeValues={":one": N(1)})),
    ],
}


def run(cases):
    backends = dynamodb_models.dynamodb_backends[DEFAULT_ACCOUNT_ID].values()
    out = {}
    for name, seq in cases.items():
        for b in backends:
            b.reset()
        setup = [call(op, body) for op, body in SETUP]
        bad = [r for r in setup if r[0] != 200]
        if bad:
            raise SystemExit("setup failed: %r" % (bad[0],))
        out[name] = [(op, body, call(op, body)) for op, body in seq + reads()]
    return out


def differences(want, got):
    n = 0
    for name, answers in want.items():
        for (op, body, w), (_, _, g) in zip(answers, got[name]):
            if w != g:
                n += 1
                print("DIFF %s: %s %s\n  moto:     %s\n  launcher: %s" % (
                    name, op, json.dumps(body)[:300], str(w)[:600], str(g)[:600]))
    return n


def main():
    launcher = open(sys.argv[1]).read()
    entry = '\nif sys.argv[1] == "--zygote":'
    if entry not in launcher:
        raise SystemExit("no entry point %r in %s: cannot load its patches alone" % (entry, sys.argv[1]))
    stock = run(CASES)
    requests = sum(len(v) for v in stock.values())
    exec(compile(launcher.split(entry)[0], sys.argv[1], "exec"), {"__name__": "moto_serial"})
    n = differences(stock, run(CASES))
    print("%d cases, %d requests each way: %d answers differ" % (len(CASES), requests, n))
    sys.exit(1 if n else 0)


if __name__ == "__main__":
    main()
