"""The files of the tables' folders, listed, moved and removed: one class per kind of store,
chosen here and only here (:func:`of`).

- a local folder (plain paths, ``file:`` URIs): the filesystem;
- S3 (``s3://``, ``s3a://``): boto3, with the settings the Spark sessions write with;
- any other store Hadoop reaches (``hdfs://``, ``gs://``, ``abfs://``...): the Hadoop
  FileSystem of a classic Spark session, the one that wrote the files, with its connectors
  and credentials. A Spark Connect client has no JVM of its own: it cannot reach those
  stores, and says so (:class:`StoreUnreachable`)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

from django.conf import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from batches.ingest.storage import S3Storage

# The stores this process lists and deletes in by itself, without a Spark session: by their
# URI schemes, and as a location recorded in the registry (normalised) begins.
OWN_SCHEMES = ("", "file", "s3", "s3a")
OWN_PREFIXES = ("/", "file:", "s3://", "s3a://")


class StoreUnreachable(RuntimeError):
    """A store only Hadoop reaches, with no classic Spark session at hand."""


class Store(Protocol):
    def files(self, location: str) -> list[tuple[str, int]]:
        """Every file under the folder ``location`` by its name inside it, with its size, in
        name order; none when the folder is not there."""
        ...

    def move(self, folder: str, names: list[str], target: str) -> None:
        """Move the files ``names`` of ``folder`` into the folder ``target``."""
        ...

    def remove(self, location: str) -> None:
        """Delete the folder ``location`` and all in it; a folder already gone is no error
        (a removal that was interrupted)."""
        ...


def reached_without_spark(location: str) -> bool:
    """Whether this process reaches ``location``'s store by itself (a local folder, S3)."""
    return urlparse(location).scheme in OWN_SCHEMES


def of(location: str, spark: SparkSession | None = None) -> Store:
    """The store of ``location``; through ``spark``'s Hadoop FileSystem when only Hadoop
    reaches it."""
    scheme = urlparse(location).scheme
    if scheme in ("", "file"):
        return LocalStore()
    if scheme in ("s3", "s3a"):
        return S3Store()
    if spark is None:
        raise StoreUnreachable(
            f"{location}: a store only Hadoop reaches; its files are listed and removed by a "
            f"worker of the Spark queue ({settings.BDRE_SPARK_QUEUE})"
        )
    return HadoopStore(spark)


class LocalStore:
    def files(self, location: str) -> list[tuple[str, int]]:
        root = _local(location)
        return sorted(
            (str(f.relative_to(root)), f.stat().st_size) for f in root.rglob("*") if f.is_file()
        )

    def move(self, folder: str, names: list[str], target: str) -> None:
        into = _local(target)
        into.mkdir(exist_ok=True)
        for name in names:
            (_local(folder) / name).rename(into / name)

    def remove(self, location: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(_local(location))


class S3Store:
    def files(self, location: str) -> list[tuple[str, int]]:
        return sorted((o.key, o.size) for page in s3_folder(location).pages() for o in page)

    def move(self, folder: str, names: list[str], target: str) -> None:
        parsed, into = urlparse(folder), urlparse(target)
        client = _s3_client(parsed.netloc)
        source, destination = _key(parsed), _key(into)
        for name in names:
            client.copy_object(
                Bucket=into.netloc,
                Key=f"{destination}/{name}",
                CopySource={"Bucket": parsed.netloc, "Key": f"{source}/{name}"},
            )
            client.delete_object(Bucket=parsed.netloc, Key=f"{source}/{name}")

    def remove(self, location: str) -> None:
        folder = s3_folder(location)
        for page in folder.pages():
            keys = [{"Key": folder.prefix + o.key} for o in page]
            if keys:
                answer = folder.client.delete_objects(
                    Bucket=folder.bucket, Delete={"Objects": keys}
                )
                if answer.get("Errors"):
                    first = answer["Errors"][0]
                    raise OSError(f"{location}: {first.get('Key')}: {first.get('Message')}")


class HadoopStore:
    """A store through the Hadoop FileSystem API of ``spark``'s JVM: the connectors and the
    credentials the session's steps write with (``spark.hadoop.*`` of SPARK_CONF)."""

    def __init__(self, spark: SparkSession):
        jvm = getattr(spark, "_jvm", None)
        jsc = getattr(spark, "_jsc", None)
        if jvm is None or jsc is None:
            raise StoreUnreachable(
                "a Spark Connect session has no JVM in this process to reach a store only "
                "Hadoop reaches (HDFS, GCS, ADLS): run the Spark queue's workers with a "
                "classic session (SPARK_MASTER, no SPARK_REMOTE) for tables on such a store"
            )
        self._path = jvm.org.apache.hadoop.fs.Path
        self._conf = jsc.hadoopConfiguration()

    def _fs(self, location: str) -> tuple[Any, Any]:
        from batches.locations import spark_path

        path = self._path(spark_path(location))
        return path.getFileSystem(self._conf), path

    def files(self, location: str) -> list[tuple[str, int]]:
        fs, path = self._fs(location)
        if not fs.exists(path):
            return []
        base = fs.makeQualified(path).toUri().getPath().rstrip("/") + "/"
        found = []
        listed = fs.listFiles(path, True)
        while listed.hasNext():
            status = listed.next()
            name = status.getPath().toUri().getPath()
            found.append((name[len(base) :] if name.startswith(base) else name, status.getLen()))
        return sorted(found)

    def move(self, folder: str, names: list[str], target: str) -> None:
        fs, into = self._fs(target)
        fs.mkdirs(into)
        for name in names:
            source = self._path(f"{folder.rstrip('/')}/{name}")
            if not fs.rename(source, self._path(into, name)):
                raise OSError(f"{folder}/{name}: Hadoop could not move it into {target}")

    def remove(self, location: str) -> None:
        fs, path = self._fs(location)
        # False when the folder is gone already (no error), and on some stores when a file
        # could not be deleted (RawLocalFileSystem on a permission error): then it is there.
        if not fs.delete(path, True) and fs.exists(path):
            raise OSError(f"{location}: Hadoop could not delete it")


def _local(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"{location}: not a local folder (batches.stores)")
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location)


def _key(parsed: Any) -> str:
    return str(parsed.path).lstrip("/").rstrip("/")


def s3_folder(location: str) -> S3Storage:
    """The keys under an ``s3://bucket/prefix`` folder, listed as a scan lists them."""
    from batches.ingest.storage import S3Storage

    parsed = urlparse(location)
    return S3Storage(parsed.netloc, _key(parsed) + "/", _s3_client(parsed.netloc))


def _s3_client(bucket: str) -> Any:
    """A client with the object store's settings the Spark sessions write with (SPARK_CONF's
    ``spark.hadoop.fs.s3a.*``, per bucket first), else boto3's own credentials."""
    from batches.ingest.storage import s3_client

    conf = settings.SPARK_CONF

    def option(name: str) -> str | None:
        return conf.get(f"spark.hadoop.fs.s3a.bucket.{bucket}.{name}") or conf.get(
            f"spark.hadoop.fs.s3a.{name}"
        )

    endpoint = option("endpoint")
    if endpoint and "://" not in endpoint:
        secure = (option("connection.ssl.enabled") or "true").lower() != "false"
        endpoint = ("https://" if secure else "http://") + endpoint
    return s3_client(
        endpoint_url=endpoint,
        region=option("endpoint.region"),
        access_key=option("access.key"),
        secret_key=option("secret.key"),
    )
