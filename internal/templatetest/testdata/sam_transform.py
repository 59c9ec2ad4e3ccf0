"""Transforms a SAM template with the AWS SAM translator (the library
cfn-lint and the SAM CLI use) and prints the CloudFormation template as
JSON. Usage: python3 sam_transform.py TEMPLATE. Used by TestSAMTransform."""
import json
import os
import sys

from cfnlint.decode import decode
from samtranslator.translator.transform import transform

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
tpl, errs = decode(sys.argv[1])
if errs:
    sys.exit("decode: %s" % errs)
for res in tpl["Resources"].values():
    if res.get("Type") == "AWS::Serverless::Function":
        # sam build replaces CodeUri with the built artifact's S3 location.
        res["Properties"]["CodeUri"] = "s3://bucket/key"


class NoManagedPolicies:
    def load(self):
        return {}


print(json.dumps(transform(tpl, {}, NoManagedPolicies()), default=str))
