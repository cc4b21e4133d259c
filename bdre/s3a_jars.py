"""The S3A connector's jars for Spark (``s3a://``), fetched by the project's own set-up:
``make s3a-jars``, ``manage.py s3a_jars`` or ``python -m bdre.s3a_jars DIR`` (the image's
build runs the last). docs/operations.md, "S3 / object storage".

The PySpark wheel carries Hadoop's client but not ``hadoop-aws`` nor the AWS SDK it needs.
Spark's usual way, ``spark.jars.packages=org.apache.hadoop:hadoop-aws:<version>``, fetches
them from Maven Central when a session starts; an installation that cannot reach Maven
Central (this project's build machines among them) takes them from the one package index
it does reach: the ``sagemaker_pyspark`` source distribution on PyPI ships
``hadoop-aws-3.3.1.jar`` and the ``aws-java-sdk-bundle-1.11.901.jar`` it was built against.
Only those two jars are kept, each checked against its SHA-256 below.

No Django here: the image's build runs it before there is any configuration.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

SDIST = "sagemaker_pyspark==1.4.5"
SDIST_FILE = "sagemaker_pyspark-1.4.5.tar.gz"
# pip builds an sdist's metadata (runs its setup.py) once downloaded: the archive's own hash
# is checked first, so only the archive pinned here is ever run.
SDIST_SHA256 = "05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb"
MEMBER_DIR = "sagemaker_pyspark-1.4.5/deps/jars/"
JARS = {
    "hadoop-aws-3.3.1.jar": "6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e",
    "aws-java-sdk-bundle-1.11.901.jar": (
        "b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead"
    ),
}

# hadoop-aws 3.3.1 reads its settings as plain numbers and names SDK v1 classes; the Hadoop
# 3.4+ client in the PySpark wheel ships defaults (core-default.xml) it cannot read: "60s"
# durations ("NumberFormatException: For input string: "60s"") and SDK v2 credential
# providers. These are 3.3.1's own defaults, as numbers (milliseconds, or seconds where
# 3.3.1 counts seconds); an installation's spark.hadoop.fs.s3a.* options win over them.
COMPAT_HADOOP_CONF = {
    "fs.s3a.threads.keepalivetime": "60",  # seconds
    "fs.s3a.connection.timeout": "200000",
    "fs.s3a.connection.establish.timeout": "5000",
    "fs.s3a.multipart.purge.age": "86400",  # seconds
    "fs.s3a.connection.ttl": "300000",
    "fs.s3a.connection.acquisition.timeout": "60000",
    "fs.s3a.connection.idle.time": "60000",
    "fs.s3a.connection.request.timeout": "0",
    # Access and secret keys from fs.s3a.access.key/secret.key (per bucket:
    # fs.s3a.bucket.<bucket>.access.key), else the EC2/ECS instance's role. Never the
    # environment's (AWS_ACCESS_KEY_ID...): a Spark JVM has none of the installation's
    # secrets in its environment (bdre.spark_cluster.jvm_env), the keys are Hadoop settings.
    "fs.s3a.aws.credentials.provider": ",".join(
        (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider",
        )
    ),
    # s3:// (how BDRE records object-store locations) read through S3A as well as s3a://.
    "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
}


class S3AJarsError(RuntimeError):
    """The jars could not be fetched or did not check out; the message says what to do."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def present(jars_dir: Path) -> list[Path] | None:
    """The two jars in ``jars_dir`` when both are there (by name: :func:`fetch` writes a
    jar only once it has checked it), else None."""
    paths = [jars_dir / name for name in JARS]
    return paths if all(p.is_file() for p in paths) else None


def spark_conf(jars_dir: str, chosen: Mapping[str, str]) -> dict[str, str]:
    """The jars of ``jars_dir`` on ``spark.jars`` (after those ``chosen`` lists: it ships
    them to the executors too) and :data:`COMPAT_HADOOP_CONF`, for a session whose own
    configuration is ``chosen``; nothing when the jars are not there or ``chosen`` brings a
    hadoop-aws of its own. The caller puts ``chosen`` over the settings, ``spark.jars`` aside."""
    jars = present(Path(jars_dir)) if jars_dir else None
    own = chosen.get("spark.jars", "") + chosen.get("spark.jars.packages", "")
    if jars is None or "hadoop-aws" in own:
        return {}
    listed = [chosen["spark.jars"]] if chosen.get("spark.jars") else []
    return {
        "spark.jars": ",".join(listed + [str(p) for p in jars]),
        **{f"spark.hadoop.{key}": value for key, value in COMPAT_HADOOP_CONF.items()},
    }


def fetch(jars_dir: Path, *, python: str = sys.executable) -> list[Path]:
    """The two jars in ``jars_dir``, downloaded first unless they are there and check out.

    The source distribution is downloaded by ``python``'s own pip (so with the index, proxy
    and certificates it is configured with) into a temporary folder, deleted afterwards."""
    jars_dir.mkdir(parents=True, exist_ok=True)
    found = present(jars_dir)
    if found and all(sha256(p) == JARS[p.name] for p in found):
        return found
    with tempfile.TemporaryDirectory(prefix="bdre-s3a-") as tmp:
        pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]
        pinned = Path(tmp) / "requirements.txt"
        pinned.write_text(f"{SDIST} --hash=sha256:{SDIST_SHA256}\n")
        download = subprocess.run(
            [*pip, "download", "--no-deps", "--require-hashes", "-r", str(pinned), "-d", tmp],
            capture_output=True,
            text=True,
        )
        sdist = Path(tmp) / SDIST_FILE
        if download.returncode != 0 or not sdist.is_file():
            tail = "\n".join((download.stderr or download.stdout).strip().splitlines()[-5:])
            raise S3AJarsError(
                f"could not download {SDIST} from the package index (offline, or no PyPI "
                f"access?): {tail}\nWithout it, put {' and '.join(JARS)} (Maven Central's "
                f"org.apache.hadoop:hadoop-aws:3.3.1 and "
                f"com.amazonaws:aws-java-sdk-bundle:1.11.901) in {jars_dir} yourself"
            )
        _extract(sdist, jars_dir)
    return [jars_dir / name for name in JARS]


def _extract(sdist: Path, jars_dir: Path) -> None:
    with tarfile.open(sdist) as archive:
        for name, expected in JARS.items():
            try:
                member = archive.getmember(MEMBER_DIR + name)
            except KeyError:
                raise S3AJarsError(f"{sdist.name} holds no {MEMBER_DIR}{name}") from None
            source = archive.extractfile(member)
            if source is None:
                raise S3AJarsError(f"{sdist.name}: {MEMBER_DIR}{name} is not a file")
            # Written beside its final name and renamed once checked: a jar under its own
            # name is always a whole, checked one (present() trusts the name).
            partial = jars_dir / f".{name}.{os.getpid()}.part"
            with source, partial.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            if (actual := sha256(partial)) != expected:
                partial.unlink()
                raise S3AJarsError(
                    f"{name} from {sdist.name} has SHA-256 {actual}, not {expected}: not installed"
                )
            partial.replace(jars_dir / name)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bdre.s3a_jars DIR", file=sys.stderr)
        return 2
    try:
        for path in fetch(Path(argv[0])):
            print(path)
    except S3AJarsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
