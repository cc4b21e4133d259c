"""Landing locations for the ingestion tests: a local folder and a real S3 endpoint
(``moto_server`` on 127.0.0.1, the ``s3_endpoint`` fixture of tests/conftest.py), behind one
small interface so every case runs on both."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from processes.models import Process
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, callable_step, scan_step


class LocalLanding:
    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.location = root.as_uri()
        self.granted = root.as_uri() + "/"
        self.metainfo = ""
        self.properties: dict[str, str] = {}

    def put(self, key: str, data: bytes = b"event\n") -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def rename(self, old: str, new: str) -> None:
        (self.root / old).rename(self.root / new)

    def uri(self, key: str) -> str:
        return (self.root / key).as_uri()


class S3Landing:
    def __init__(self, endpoint: str):
        from batches.ingest.storage import s3_client

        self.client = s3_client(endpoint_url=endpoint, region="us-east-1")
        self.bucket = f"landing-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=self.bucket)
        self.location = f"s3://{self.bucket}/feed/"
        self.granted = f"s3://{self.bucket}/"
        # The endpoint is the granted server's (scan_server), never a step's property.
        self.endpoint = endpoint
        self.metainfo = f"endpoint_url={endpoint}\nregion=us-east-1"
        self.properties: dict[str, str] = {}

    def put(self, key: str, data: bytes = b"event\n") -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"feed/{key}", Body=data)

    def rename(self, old: str, new: str) -> None:
        self.client.copy_object(
            Bucket=self.bucket,
            Key=f"feed/{new}",
            CopySource={"Bucket": self.bucket, "Key": f"feed/{old}"},
        )
        self.client.delete_object(Bucket=self.bucket, Key=f"feed/{old}")

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/feed/{key}"


@pytest.fixture(params=["local", "s3"])
def landing(request, tmp_path):
    if request.param == "local":
        return LocalLanding(tmp_path / "landing")
    return S3Landing(request.getfixturevalue("s3_endpoint"))


@pytest.fixture
def ingest_job(team, landing):
    """``ingest_job(**scan_properties)``: an ingestion job scanning the landing, with one
    downstream job consuming its files."""

    # The installation's superuser granted the team its landing.
    grant_root(team.group, landing.granted, metainfo=landing.metainfo)

    def make(**props: object) -> tuple[Process, Process, Process]:
        options = {**landing.properties, **{k: str(v) for k, v in props.items()}}
        location = options.pop("location", landing.location)
        job = build_job(
            team,
            f"ingest_{uuid.uuid4().hex[:6]}",
            [scan_step("scan_" + uuid.uuid4().hex[:6], location, **options)],
        )
        consumer = build_job(
            team,
            f"load_{uuid.uuid4().hex[:6]}",
            [callable_step("load_" + uuid.uuid4().hex[:6], upstream=[job])],
        )
        return job, job.steps.get(), consumer.steps.get()

    return make
