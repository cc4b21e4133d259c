"""One SparkSession per worker process, created on first use and configured from settings.

Imported only by the Spark step kinds, never at start-up: the web process and the workers
start without PySpark.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from processes.step_kinds.spark_conf import (
    NOT_CONFIGURABLE,
    SANDBOX_CONF,
    STEP_GROUP,
    RefusedSparkOption,
    runtime_conf,
)

if TYPE_CHECKING:
    from pyspark.conf import SparkConf
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client import DefaultChannelBuilder

log = logging.getLogger(__name__)
_lock = threading.Lock()
_session: SparkSession | None = None


def get_spark() -> SparkSession:
    """The process's SparkSession: a Spark Connect session when ``SPARK_REMOTE`` names a
    server (or when the process has one already: the test suite's), else a classic one
    (``SPARK_MASTER``, warehouse under ``BDRE_WAREHOUSE``, UI off unless ``SPARK_UI=true``,
    shuffle partitions sized for the machine, the sandbox's settings). The steps use only
    the DataFrame and SQL API, which both kinds of session have."""
    global _session
    with _lock:
        if _session is None or is_stopped(_session):
            remote = _connect_session()
            if remote is None and settings.SPARK_REMOTE:
                from pyspark.sql.connect.session import SparkSession as ConnectSession

                channel = connect_channel(settings.SPARK_REMOTE, settings.SPARK_CONNECT_TOKEN)
                # What SparkSession.builder.remote() does and channelBuilder() does not: mark
                # the process as a Connect client's, or pyspark.sql.functions takes the classic
                # implementation and asserts on the SparkContext a Connect client has not.
                os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
                remote = cast(
                    "SparkSession", ConnectSession.builder.channelBuilder(channel).getOrCreate()
                )
            _session = _classic_session() if remote is None else _configured(remote)
        return _session


_TOKEN_PARAM = re.compile(r";token=([^;]*)")


def connect_channel(url: str, token: str) -> DefaultChannelBuilder:
    """The channel to the Spark Connect server at ``url`` (``sc://host:port/;params``), which
    sends the server's token (``token``, else one in ``url``) with every call.

    PySpark sends a token only over TLS, or to a server named ``localhost``; Spark's own
    server has no TLS. Without ``use_ssl=true`` in the URL the token goes as the header
    Spark's server checks (``authorization: Bearer``) on a plain channel: it proves the
    worker is BDRE's, it does not hide the traffic (docs/operations.md)."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    found = _TOKEN_PARAM.search(url)
    token = token or (found[1] if found else "")
    channel = DefaultChannelBuilder(_TOKEN_PARAM.sub("", url))
    if token and channel.use_ssl:
        channel.set(channel.PARAM_TOKEN, token)
    elif token:
        channel.set("authorization", f"Bearer {token}")
    return channel


def _connect_session() -> SparkSession | None:
    """The Spark Connect session this process made already, if any (never imports the
    Connect client to find out)."""
    module = sys.modules.get("pyspark.sql.connect.session")
    if module is None:
        return None
    session: SparkSession | None = module.SparkSession.getActiveSession()
    if session is None:
        session = module.SparkSession._get_default_session()
    return session


def _configured(session: SparkSession) -> SparkSession:
    """A Connect session with the runtime settings, BDRE's and ``SPARK_CONF``'s; the static
    ones (the sandbox's, the warehouse, the codegen cache, executors) are the server's."""
    for key, value in runtime_conf().items():
        if session.conf.isModifiable(key):
            session.conf.set(key, value)
    for key, value in SANDBOX_CONF.items():
        if session.conf.isModifiable(key):
            session.conf.set(key, value)
        elif session.conf.get(key, None) != value:
            # A server not started with BDRE's settings (manage.py spark_connect_server) would
            # run the steps' Spark SQL without Spark's half of the sandbox.
            raise ImproperlyConfigured(
                f"the Spark Connect server has {key}={session.conf.get(key, None)}, not "
                f"{value}: start it with the Spark SQL sandbox's settings (docs/security.md)"
            )
    static = []
    for key, value in _checked(settings.SPARK_CONF).items():
        if session.conf.isModifiable(key):
            session.conf.set(key, value)
        else:
            static.append(key)
    if static:
        log.warning(
            "SPARK_CONF options a Spark Connect client cannot set, left to the server's own "
            "configuration: %s",
            ", ".join(sorted(static)),
        )
    return session


def spark_defaults() -> dict[str, str]:
    """``$SPARK_CONF_DIR/spark-defaults.conf`` as Spark reads it (``key value`` lines)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    path = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    if path is None or not path.is_file():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            # Java properties, as Spark reads them: "key value", "key=value" or "key: value".
            key, value = [*re.split(r"\s*[=:\s]\s*", line, maxsplit=1), ""][:2]
            found[key] = value.strip()
    return found


def _checked(conf: dict[str, str]) -> dict[str, str]:
    refused = sorted(k for k in conf if k.startswith(NOT_CONFIGURABLE))
    if refused:
        raise ImproperlyConfigured(
            f"Spark configuration cannot set {', '.join(refused)}: use SPARK_REMOTE for a "
            "Spark Connect server; BDRE's tables are in its own catalog (docs/operations.md)"
        )
    changed = sorted(k for k, v in conf.items() if k in SANDBOX_CONF and v != SANDBOX_CONF[k])
    if changed:
        raise ImproperlyConfigured(
            f"Spark configuration cannot change {', '.join(changed)}: the Spark SQL sandbox's "
            "settings (docs/security.md)"
        )
    return conf


def session_conf(master: str) -> dict[str, str]:
    """Everything a classic session is built with, lowest first: BDRE's defaults (the S3A
    connector's among them, :func:`s3a_conf`), then ``spark-defaults.conf``
    (``SPARK_CONF_DIR``), then ``SPARK_CONF``, then the sandbox's settings, which neither
    may change. On a standalone master an application takes one core unless told
    otherwise: Spark's default is every core of the cluster, so the first Spark-queue
    process would hold them all and the next one's step would wait forever."""
    defaults = {
        "spark.app.name": "bdre",
        "spark.sql.warehouse.dir": str(settings.BDRE_WAREHOUSE / "spark-warehouse"),
        "spark.ui.enabled": str(settings.SPARK_UI).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": settings.SPARK_DRIVER_MEMORY,
        # Executors run the worker's own interpreter, where BDRE and its dependencies are.
        "spark.pyspark.python": sys.executable,
        **runtime_conf(),
    }
    if master.startswith("spark://"):
        defaults["spark.cores.max"] = "1"
    if settings.SPARK_EVENT_LOG:
        # Under the warehouse, which every BDRE process (and a History Server beside them)
        # reaches at the same path; Spark does not create the folder and fails without it.
        events = settings.BDRE_WAREHOUSE / "spark-events"
        events.mkdir(parents=True, exist_ok=True)
        defaults["spark.eventLog.enabled"] = "true"
        defaults["spark.eventLog.dir"] = events.as_uri()
    chosen = {**_checked(spark_defaults()), **_checked(settings.SPARK_CONF)}
    s3a = s3a_conf(chosen)
    # The installation's jars and the connector's; its S3A settings over the connector's.
    jars = {"spark.jars": s3a.pop("spark.jars")} if s3a else {}
    return {**defaults, **s3a, **chosen, **jars, **SANDBOX_CONF}


def s3a_conf(chosen: Mapping[str, str]) -> dict[str, str]:
    """The S3A connector's jars on ``spark.jars`` (which ships them to the executors too)
    and the Hadoop settings those jars need (:mod:`bdre.s3a_jars`), when ``make s3a-jars``
    has fetched them, unless the installation's own configuration (``chosen``) brings a
    hadoop-aws of its own. The installation's ``spark.hadoop.fs.s3a.*`` win over these."""
    from bdre import s3a_jars

    return s3a_jars.spark_conf(settings.BDRE_SPARK_JARS_DIR, chosen)


def _classic_session() -> SparkSession:
    from pyspark.conf import SparkConf
    from pyspark.sql import SparkSession

    if os.environ.get("SPARK_REMOTE") == "":
        # PySpark reads SPARK_REMOTE itself: set but empty, it would not make a classic session.
        del os.environ["SPARK_REMOTE"]
    conf = session_conf(settings.SPARK_MASTER)
    launch = {**conf, "spark.master": settings.SPARK_MASTER}
    _ensure_gateway(SparkConf(loadDefaults=False).setAll(list(launch.items())))
    builder = SparkSession.builder.master(settings.SPARK_MASTER)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


# What pyspark.java_gateway.launch_gateway puts in the JVM's environment for itself.
_GATEWAY_ENV = ("SPARK_CONNECT_MODE", "_PYSPARK_DRIVER_CONN_INFO_PATH")


class _JvmPopenKwargs(dict[str, Any]):
    """``popen_kwargs`` of PySpark's ``launch_gateway``, which builds the JVM's environment
    from all of ``os.environ`` and stores it as ``popen_kwargs["env"]``: stored here, it is
    :func:`bdre.spark_cluster.jvm_env` of it (and the gateway's own two variables).

    Chosen over the alternatives: swapping ``os.environ`` for the launch would take the
    database's and the broker's settings from this process's other threads (a heartbeat, a
    Celery thread) for the seconds a JVM takes to start; a launcher of our own would copy
    PySpark's handshake with the JVM (its connection file, its secret, its imports) and drift
    from it. PySpark changing how it passes ``env`` fails the environ test
    (tests/processes/step_kinds/test_spark_jvm_env.py), not silently."""

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "env":
            from bdre.spark_cluster import jvm_env

            value = {**jvm_env(value), **{k: value[k] for k in _GATEWAY_ENV if k in value}}
        super().__setitem__(key, value)


def _ensure_gateway(conf: SparkConf) -> None:
    """This process's JVM (PySpark keeps one for every SparkContext it makes), started with
    ``conf`` and an environment without the installation's secrets unless it runs already
    (the test suite's session starts its own)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is None:
            gateway = launch_gateway(conf, popen_kwargs=_JvmPopenKwargs())  # type: ignore[no-untyped-call]
            SparkContext._gateway = gateway
            SparkContext._jvm = gateway.jvm


def is_connect(session: SparkSession) -> bool:
    """Whether ``session`` is a Spark Connect client's (no JVM, no SparkContext)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def is_stopped(session: SparkSession) -> bool:
    if is_connect(session):
        return bool(cast(Any, session).is_stopped)
    return session.sparkContext._jsc is None


def application_id(session: SparkSession) -> str:
    """The Spark application the session's jobs run in (``spark.app.id``, which a Connect
    server shares between its clients), and for a Connect session its session id."""
    app_id = session.conf.get("spark.app.id", "") or ""
    if is_connect(session):
        return f"{app_id} session {cast(Any, session).session_id}".strip()
    return app_id


def cancel_all() -> None:
    """Cancel every running Spark job of this process's session, if it has one: a Connect
    session interrupts its own operations on the server."""
    session = _session
    if session is None or is_stopped(session):
        return
    if is_connect(session):
        session.interruptAll()
    else:
        session.sparkContext.cancelAllJobs()


@contextmanager
def step_conf(session: SparkSession, options: Mapping[str, str]) -> Iterator[None]:
    """``options`` set on ``session`` while the step runs, and the session's own values put
    back after it: the worker's session outlives the step and runs other steps next."""
    previous: dict[str, str | None] = {}
    try:
        for key, value in options.items():
            if not session.conf.isModifiable(key):
                raise RefusedSparkOption(
                    f"{STEP_GROUP} option {key}: this Spark session cannot change it"
                )
            # None: not set on the session, so unset again (back to Spark's default).
            previous[key] = session.conf.get(key, None)
            session.conf.set(key, value)
        yield
    finally:
        if previous and not is_stopped(session):
            _restore(session, previous)


def _restore(session: SparkSession, previous: Mapping[str, str | None]) -> None:
    try:
        for key, value in previous.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)
    except Exception:
        # The next step (maybe another team's) would run with this one's options: a new
        # session, made on its first use, has none of them.
        log.exception("could not put the session's Spark options back; stopping the session")
        session.stop()


# Keys whose values are not shown on a run (Spark's own redaction matches fewer).
SECRET_KEY = re.compile(r"password|secret|token|key|credential", re.IGNORECASE)
SECRET_VALUE = re.compile(r"(password|secret|token)=|://[^/@\s]*:[^/@\s]*@", re.IGNORECASE)
REDACTED = "*** (redacted)"


def effective_conf(session: SparkSession) -> dict[str, str]:
    """Every option set on ``session`` (the installation's, the step's, Spark's own), with
    the values of the secret-looking ones redacted: what a run records of its Spark."""
    return {
        key: REDACTED if SECRET_KEY.search(key) or SECRET_VALUE.search(value) else value
        for key, value in sorted(session.conf.getAll.items())
    }


def ui_url(session: SparkSession) -> str:
    """The Spark UI of the session's application, when it has one in this process: none
    with the UI off, nor through Connect (the server's UI is the server's)."""
    if is_connect(session):
        return ""
    return session.sparkContext.uiWebUrl or ""
