"""moto's S3 server for the contract tests of `s3_mount` entries, from `target/moto-venv`
(`scripts/test` installs it; `SA_MOTO_VENV` names another venv). Objects are written and read
with the boto3 that moto brings, run in moto's own venv, so the contract venv stays the
published client's.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY_ID = "AKIACONTRACTTESTS01"
SECRET_ACCESS_KEY = "contract-s3-secret-never-in-a-sandbox-5d2b"

_BOTO = """
import json, sys, boto3
op, endpoint, bucket, key, data = json.loads(sys.argv[1])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="x", aws_secret_access_key="y")
if op == "bucket":
    s3.create_bucket(Bucket=bucket)
elif op == "put":
    s3.put_object(Bucket=bucket, Key=key, Body=data.encode())
elif op == "get":
    try:
        print(json.dumps(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()))
    except s3.exceptions.NoSuchKey:
        print("null")
elif op == "keys":
    r = s3.list_objects_v2(Bucket=bucket)
    print(json.dumps(sorted(o["Key"] for o in r.get("Contents", []))))
"""


class MotoS3:
    def __init__(self) -> None:
        venv = Path(os.environ.get("SA_MOTO_VENV", ROOT / "target" / "moto-venv"))
        self.server_bin = venv / "bin" / "moto_server"
        self.python = venv / "bin" / "python"
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def start(self) -> "MotoS3":
        if not self.server_bin.exists():
            pytest.fail(
                f"moto is not installed at {self.server_bin}: run `python3 -m venv target/moto-venv && "
                "target/moto-venv/bin/pip install -r tests/contract/requirements-moto.txt` (scripts/test does)"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [str(self.server_bin), "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.endpoint, timeout=2)
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def server_env(self) -> dict[str, str]:
        """What points a server at this moto."""
        return {
            "SANDBOX_AGENTS_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }

    def _boto(self, op: str, bucket: str, key: str = "", data: str = "") -> str:
        out = subprocess.run(
            [str(self.python), "-c", _BOTO, json.dumps([op, self.endpoint, bucket, key, data])],
            check=True, capture_output=True, text=True,
        )
        return out.stdout

    def create_bucket(self, bucket: str) -> None:
        self._boto("bucket", bucket)

    def put(self, bucket: str, key: str, data: str) -> None:
        self._boto("put", bucket, key, data)

    def get(self, bucket: str, key: str) -> str | None:
        return json.loads(self._boto("get", bucket, key))

    def keys(self, bucket: str) -> list[str]:
        return json.loads(self._boto("keys", bucket))
