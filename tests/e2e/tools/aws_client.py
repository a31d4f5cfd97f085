#!/usr/bin/python3
"""The sandbox's AWS client (e2e vault_sigv4): boto3 and botocore with a
FAKE key pair, against the real AWS host names the test bed's DNS maps to
its fake endpoint (tests/e2e/servers/aws.py).

  aws_client.py bound|unbound BUCKET CA_BUNDLE

One JSON line per step on stdout: {"step", "ok", ...}.
bound: S3 PUT and GET of an object (virtual-host style,
BUCKET.s3.us-east-1.amazonaws.com), a Bedrock-style JSON POST to
bedrock-runtime.us-east-1.amazonaws.com signed by botocore's SigV4Auth
(this botocore has no bedrock-runtime model), a presigned S3 GET URL,
and both again with a body over egressd's 1 MiB signing bound.
unbound: the S3 GET again (egressd not signing: the origin must refuse).
"""

import json
import sys
import urllib.error
import urllib.request
import ssl

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

FAKE_ID = "AKIAFAKESANDBOXKEY00"
FAKE_SECRET = "fake/sandbox/secret/key/0000000000000000"
KEY = "dir/hello world (1).txt"
DATA = b"hello from the sandbox\n" * 3
BIG = (1 << 20) + 4096


def out(**kw):
    print(json.dumps(kw), flush=True)


def s3_client(ca):
    return boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id=FAKE_ID,
        aws_secret_access_key=FAKE_SECRET,
        aws_session_token="fake-sandbox-session-token",
        endpoint_url="https://s3.us-east-1.amazonaws.com", verify=ca,
        config=Config(s3={"addressing_style": "virtual"},
                      retries={"max_attempts": 1}, connect_timeout=5,
                      read_timeout=10))


def s3_get(s3, bucket):
    try:
        r = s3.get_object(Bucket=bucket, Key=KEY)
        body = r["Body"].read()
        out(step="s3_get", ok=body == DATA, status=200, len=len(body))
    except ClientError as e:
        out(step="s3_get", ok=False,
            status=e.response["ResponseMetadata"]["HTTPStatusCode"],
            code=e.response["Error"]["Code"])


def bedrock(ca, step="bedrock", pad=0):
    url = ("https://bedrock-runtime.us-east-1.amazonaws.com/model/"
           "anthropic.claude-v2%3A1/invoke")
    payload = json.dumps({"prompt": "\n\nHuman: hi\n\nAssistant:",
                          "max_tokens_to_sample": 20,
                          "pad": "x" * pad}).encode()
    req = AWSRequest(method="POST", url=url, data=payload,
                     headers={"Content-Type": "application/json",
                              "Accept": "application/json"})
    SigV4Auth(Credentials(FAKE_ID, FAKE_SECRET), "bedrock",
              "us-east-1").add_auth(req)
    p = req.prepare()
    r = urllib.request.Request(p.url, data=payload, method="POST",
                               headers=dict(p.headers.items()))
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(r, context=ctx, timeout=10) as resp:
            body = json.loads(resp.read())
            out(step=step, ok=True, status=resp.status, body=body)
    except urllib.error.HTTPError as e:
        out(step=step, ok=False, status=e.code,
            body=e.read().decode("latin-1")[:300])


def presigned(s3, bucket, ca):
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": KEY}, ExpiresIn=300)
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            out(step="presigned", ok=False, status=resp.status)
    except urllib.error.HTTPError as e:
        out(step="presigned", ok=e.code == 403, status=e.code,
            body=e.read().decode("latin-1")[:200])


def main():
    phase, bucket, ca = sys.argv[1:4]
    s3 = s3_client(ca)
    if phase == "bound":
        r = s3.put_object(Bucket=bucket, Key=KEY, Body=DATA)
        out(step="s3_put", ok=r["ResponseMetadata"]["HTTPStatusCode"] == 200)
        s3_get(s3, bucket)
        bedrock(ca)
        presigned(s3, bucket, ca)
        # over the 1 MiB bound: S3 over TLS takes UNSIGNED-PAYLOAD,
        # anything else is refused rather than sent unsigned
        r = s3.put_object(Bucket=bucket, Key="big", Body=b"b" * BIG)
        out(step="s3_put_big",
            ok=r["ResponseMetadata"]["HTTPStatusCode"] == 200)
        bedrock(ca, "bedrock_big", BIG)
    else:
        s3_get(s3, bucket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
