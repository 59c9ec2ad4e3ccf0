"""Create taskledger's DynamoDB tables, SQS queues and S3 bucket in LocalStack.

LocalStack runs this READY hook (it exec()s .py hooks in its own Python,
which has boto3 and PyYAML) once its services accept requests. It reads
template.yaml, mounted read-only by docker-compose.yml, and makes every
AWS::DynamoDB::Table and AWS::SQS::Queue in it named <prefix>-<LogicalId>
(TASKLEDGER_PREFIX, default taskledger-local: the names `make run` uses),
and every AWS::S3::Bucket (the payload bucket) named lower(<prefix>-<LogicalId>),
the same way internal/stack does. It is idempotent: an existing table is
reused (TTL enabled if it is not), an existing queue gets the template's
attributes, an existing bucket is reused.

It is a convenience for aws-cli users: `make run` and the test suites
(TASKLEDGER_BACKENDS=external) create what they need themselves, through
internal/stack, whether or not this hook ran. As there, every property is
either applied or deliberately skipped, and an unknown one is an error, so the
hook cannot silently drift from the template.

It also runs outside LocalStack, against any endpoint:
  TASKLEDGER_TEMPLATE=template.yaml TASKLEDGER_INIT_ENDPOINT=http://127.0.0.1:5000 \
    python3 localstack/init/ready.d/10-taskledger-resources.py
"""

import json
import os

import boto3
import botocore.config
import yaml

TEMPLATE = os.environ.get("TASKLEDGER_TEMPLATE", "/etc/localstack/taskledger/template.yaml")
PREFIX = os.environ.get("TASKLEDGER_PREFIX", "taskledger-local")
ENDPOINT = os.environ.get("TASKLEDGER_INIT_ENDPOINT", "http://localhost:4566")
REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")

TABLE_SKIPPED = {"PointInTimeRecoverySpecification", "SSESpecification", "DeletionProtectionEnabled",
                 "ContributorInsightsSpecification", "Tags"}
QUEUE_SKIPPED = {"SqsManagedSseEnabled", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "Tags"}
# As internal/stack/bucket.go: the name is applied; encryption, public-access
# blocks, ownership, CORS and lifecycle are the account's business (an
# emulator neither enforces nor ages them; local uploads go through the
# same-origin proxy of `make run`), and the AWS::S3::BucketPolicy is not made.
BUCKET_SKIPPED = {"BucketEncryption", "PublicAccessBlockConfiguration", "OwnershipControls",
                  "LifecycleConfiguration", "VersioningConfiguration", "Tags", "CorsConfiguration"}
QUEUE_ATTRIBUTES = {"VisibilityTimeout", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
                    "DelaySeconds", "MaximumMessageSize", "RedrivePolicy"}


class TemplateLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation's short-form tags (!Ref, !GetAtt, !Sub, ...)."""


def _short_form(loader, tag, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag == "Ref":
        return {"Ref": value}
    if tag == "Condition":
        return {"Condition": value}
    if tag == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {"Fn::" + tag: value}


TemplateLoader.add_multi_constructor("!", _short_form)


def log(msg):
    print("taskledger init: " + msg, flush=True)


def check_keys(props, where, applied, skipped):
    unknown = set(props) - set(applied) - set(skipped)
    if unknown:
        raise ValueError("%s: unsupported properties %s (apply them here and in internal/stack)"
                         % (where, sorted(unknown)))


def resolve(value, queues, where):
    """Evaluates the intrinsics a table or queue may hold: !GetAtt Queue.Arn, !Ref Queue."""
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Fn::GetAtt" and arg[1] == "Arn" and arg[0] in queues:
            return queues[arg[0]]["arn"]
        if fn == "Ref" and arg in queues:
            return queues[arg]["url"]
        if fn.startswith("Fn::") or fn == "Ref":
            raise ValueError("%s: cannot evaluate %s here (a queue created earlier is all this hook knows)"
                             % (where, json.dumps(value)))
    if isinstance(value, dict):
        return {k: resolve(v, queues, where) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, queues, where) for v in value]
    return value


def create_table(ddb, logical_id, props):
    name = PREFIX + "-" + logical_id
    check_keys(props, logical_id, {"BillingMode", "AttributeDefinitions", "KeySchema",
                                   "GlobalSecondaryIndexes", "TimeToLiveSpecification"}, TABLE_SKIPPED)
    if props.get("BillingMode", "PROVISIONED") != "PAY_PER_REQUEST":
        raise ValueError(logical_id + ": only BillingMode PAY_PER_REQUEST is supported")
    args = {"TableName": name, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": props["AttributeDefinitions"], "KeySchema": props["KeySchema"]}
    gsis = [{k: g[k] for k in ("IndexName", "KeySchema", "Projection")} for g in props.get("GlobalSecondaryIndexes", [])]
    if gsis:
        args["GlobalSecondaryIndexes"] = gsis
    try:
        ddb.create_table(**args)
        verb = "created"
    except ddb.exceptions.ResourceInUseException:
        verb = "reused"
    ddb.get_waiter("table_exists").wait(TableName=name)
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        status = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]["TimeToLiveStatus"]
        if status not in ("ENABLED", "ENABLING"):
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={
                "AttributeName": ttl["AttributeName"], "Enabled": True})
    log("%s table %s" % (verb, name))


def create_queue(sqs, logical_id, props, queues):
    name = PREFIX + "-" + logical_id
    check_keys(props, logical_id, QUEUE_ATTRIBUTES, QUEUE_SKIPPED)
    attrs = {}
    for key in QUEUE_ATTRIBUTES & set(props):
        value = resolve(props[key], queues, logical_id)
        attrs[key] = json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else str(value)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]  # returns the existing queue's URL
    if attrs:
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attrs)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queues[logical_id] = {"url": url, "arn": arn}
    log("converged queue %s (%s)" % (name, url))


def create_bucket(s3, logical_id, props):
    name = (PREFIX + "-" + logical_id).lower()  # S3 names are lower case
    check_keys(props, logical_id, {"BucketName"}, BUCKET_SKIPPED)  # BucketName replaced by name
    # HEAD first: in us-east-1 S3 answers 200 to creating a bucket the
    # caller already owns, so CreateBucket cannot tell.
    try:
        s3.head_bucket(Bucket=name)
        verb = "reused"
    except s3.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
        args = {"Bucket": name}
        if REGION != "us-east-1":
            args["CreateBucketConfiguration"] = {"LocationConstraint": REGION}
        try:
            s3.create_bucket(**args)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        verb = "created"
    log("%s bucket %s" % (verb, name))


def queue_order(resources):
    """Queues in dependency order: a dead-letter queue before the queue whose RedrivePolicy names it."""
    pending = [i for i, r in resources.items() if r["Type"] == "AWS::SQS::Queue"]
    done = []

    def deps(i):
        found = []

        def walk(v):
            if isinstance(v, dict):
                if "Fn::GetAtt" in v:
                    found.append(v["Fn::GetAtt"][0])
                if "Ref" in v:
                    found.append(v["Ref"])
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(resources[i].get("Properties", {}))
        return [d for d in found if d in resources and resources[d]["Type"] == "AWS::SQS::Queue"]

    while pending:
        ready = [i for i in pending if all(d in done for d in deps(i))]
        if not ready:
            raise ValueError("queues reference each other in a cycle: %s" % pending)
        for i in sorted(ready):
            done.append(i)
            pending.remove(i)
    return done


def main():
    with open(TEMPLATE) as f:
        resources = yaml.load(f, Loader=TemplateLoader)["Resources"]
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=REGION)
    ddb = session.client("dynamodb", endpoint_url=ENDPOINT)
    sqs = session.client("sqs", endpoint_url=ENDPOINT)
    # Path-style, as the Go clients use with an endpoint: no
    # <bucket>.localhost DNS lookups.
    s3 = session.client("s3", endpoint_url=ENDPOINT,
                        config=botocore.config.Config(s3={"addressing_style": "path"}))
    log("creating %s-* from %s on %s" % (PREFIX, TEMPLATE, ENDPOINT))
    for logical_id in sorted(resources):
        if resources[logical_id]["Type"] == "AWS::DynamoDB::Table":
            create_table(ddb, logical_id, resources[logical_id].get("Properties", {}))
    queues = {}
    for logical_id in queue_order(resources):
        create_queue(sqs, logical_id, resources[logical_id].get("Properties", {}), queues)
    for logical_id in sorted(resources):
        if resources[logical_id]["Type"] == "AWS::S3::Bucket":
            create_bucket(s3, logical_id, resources[logical_id].get("Properties", {}))
    log("done")


# No `if __name__ == "__main__"`: LocalStack exec()s this file with empty globals.
main()
