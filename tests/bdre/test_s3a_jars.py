"""The S3A connector's jars, fetched by the project's own set-up (make s3a-jars): only the two
jars, checked, once; a clear error when the index cannot be reached or a jar does not check
out. The download itself is what the Spark tests' session does (tests/conftest.py)."""

from __future__ import annotations

import io
import tarfile

import pytest
from django.core.management import CommandError, call_command

from bdre import s3a_jars


def sdist(path, contents: dict[str, bytes]):
    """A source distribution shaped like sagemaker_pyspark's, holding ``contents``."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in contents.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


def test_a_jar_that_does_not_check_out_is_not_installed(tmp_path):
    names = list(s3a_jars.JARS)
    archive = sdist(
        tmp_path / s3a_jars.SDIST_FILE,
        {s3a_jars.MEMBER_DIR + name: b"not the jar" for name in names}
        | {"sagemaker_pyspark-1.4.5/setup.py": b""},
    )
    jars = tmp_path / "jars"
    jars.mkdir()
    with pytest.raises(s3a_jars.S3AJarsError, match=f"{names[0]} from .* has SHA-256"):
        s3a_jars._extract(archive, jars)
    assert list(jars.iterdir()) == []
    assert s3a_jars.present(jars) is None


def test_an_sdist_without_the_jars_is_an_error(tmp_path):
    archive = sdist(tmp_path / s3a_jars.SDIST_FILE, {"sagemaker_pyspark-1.4.5/setup.py": b""})
    with pytest.raises(s3a_jars.S3AJarsError, match=r"holds no .*hadoop-aws-3\.3\.1\.jar"):
        s3a_jars._extract(archive, tmp_path)


def test_offline_the_fetch_says_what_to_do(tmp_path, monkeypatch):
    # pip with no index to reach: what a machine without PyPI access gets.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(s3a_jars.S3AJarsError) as error:
        s3a_jars.fetch(tmp_path / "jars")
    message = str(error.value)
    assert message.startswith(f"could not download {s3a_jars.SDIST} from the package index")
    assert f"in {tmp_path / 'jars'} yourself" in message
    assert "org.apache.hadoop:hadoop-aws:3.3.1" in message
    assert s3a_jars.present(tmp_path / "jars") is None


def test_the_command_fails_clearly_offline_and_when_switched_off(tmp_path, settings, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    settings.BDRE_SPARK_JARS_DIR = str(tmp_path / "jars")
    with pytest.raises(CommandError, match="could not download sagemaker_pyspark"):
        call_command("s3a_jars")
    settings.BDRE_SPARK_JARS_DIR = ""
    with pytest.raises(CommandError, match="switched off"):
        call_command("s3a_jars")


def test_checked_jars_in_place_are_not_fetched_again(tmp_path, monkeypatch):
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in s3a_jars.JARS:
        (jars / name).write_bytes(name.encode())
    monkeypatch.setattr(s3a_jars, "JARS", {n: s3a_jars.sha256(jars / n) for n in s3a_jars.JARS})
    # An interpreter that cannot run pip: the fetch must not need it.
    assert s3a_jars.fetch(jars, python="/bin/false") == [jars / n for n in s3a_jars.JARS]
    # A jar changed since is fetched again (and here that fails: no pip).
    (jars / "hadoop-aws-3.3.1.jar").write_bytes(b"changed")
    with pytest.raises(s3a_jars.S3AJarsError, match="could not download"):
        s3a_jars.fetch(jars, python="/bin/false")


def test_main_prints_the_jars_or_the_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert s3a_jars.main([str(tmp_path)]) == 1
    assert "error: could not download" in capsys.readouterr().err
    assert s3a_jars.main([]) == 2
