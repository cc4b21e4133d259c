"""Django settings for BDRE.

Every setting comes from the environment. The defaults run with no server at all: a SQLite
file and the Celery filesystem transport under ``var/``, Spark in local mode.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from bdre.env import env_bool, env_float, env_int, env_list, env_spark_conf, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("BDRE_VAR_DIR", str(BASE_DIR / "var"))).resolve()

# DEBUG=false is production mode: secrets must then be given explicitly.
DEBUG = env_bool("DEBUG", True)
PRODUCTION = not DEBUG

_DEV_SECRET_KEY = "bdre-development-only-secret-key-do-not-use-in-production"
SECRET_KEY = env_str("SECRET_KEY", "" if PRODUCTION else _DEV_SECRET_KEY)
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false (production mode).")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "bdre.apps.BdreAdminConfig",  # django.contrib.admin, for superusers only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from here: no CDN
    "django_celery_beat",
    "bdre.apps.BdreConfig",
    "processes",
    "batches",
    "lineage",
    "alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Pages answer errors with the site's own pages, the API with JSON, whatever DEBUG is.
    "bdre.error_pages.ErrorPageMiddleware",
]

ROOT_URLCONF = "bdre.urls"
WSGI_APPLICATION = "bdre.wsgi.application"
ASGI_APPLICATION = "bdre.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project's pages: the top-level templates/, which bdre/templates links to so
        # that the wheel carries them inside the package. Named here as well as found through
        # APP_DIRS so that its admin/ and registration/ pages come before those of
        # django.contrib.admin, which is installed first.
        "DIRS": [Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "bdre.context_processors.ui",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'bdre.sqlite3'}")
_db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0))
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent writers (web, workers, Beat) must wait for the lock instead of failing with
    # "database is locked": WAL lets readers run beside one writer, and IMMEDIATE transactions
    # take the write lock at BEGIN so that no transaction has to upgrade (and deadlock) later.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("SQLITE_TIMEOUT_SECONDS", 30),
        "init_command": (
            "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=ON;"
        ),
    }
    if _db["NAME"] and _db["NAME"] != ":memory:":
        Path(_db["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The test database is a file, not memory, so that tests can run real parallel
    # processes against it.
    _db["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

SESSION_ENGINE = "bdre.sessions"

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Without collectstatic (the embedded default), serve straight from the apps; production
# (DEBUG=false) serves what collectstatic gathered.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
CSRF_FAILURE_VIEW = "bdre.error_pages.csrf_failure"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "ui-dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- Cache, log-in lockout, throttles and API tokens (docs/security.md) -------------------
# The cache holds the counters of failed log-ins and of API throttles. Memory (the default)
# needs no service but is per process: with several web processes an attacker gets each
# process's allowance. BDRE_CACHE=database shares the counters through the database (run
# `manage.py createcachetable` once).
BDRE_CACHE = env_str("BDRE_CACHE", "memory")
if BDRE_CACHE not in ("memory", "database"):
    raise ImproperlyConfigured(f"BDRE_CACHE must be memory or database, got {BDRE_CACHE!r}")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "bdre"}
        if BDRE_CACHE == "memory"
        else {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "bdre_cache"}
    )
}
# After this many failed log-ins for one user name (or from one address) within the window,
# every log-in of that name (or from that address) is refused for the lockout period, the
# right password included. The page, the admin's and the token endpoint share the counts.
BDRE_LOGIN_MAX_FAILURES_USER = env_int("BDRE_LOGIN_MAX_FAILURES_USER", 5)
BDRE_LOGIN_MAX_FAILURES_IP = env_int("BDRE_LOGIN_MAX_FAILURES_IP", 20)
BDRE_LOGIN_WINDOW_SECONDS = env_int("BDRE_LOGIN_WINDOW_SECONDS", 900)
BDRE_LOGIN_LOCKOUT_SECONDS = env_int("BDRE_LOGIN_LOCKOUT_SECONDS", 900)
# Requests with an unknown API token from one address; then that address is refused (429)
# for the lockout period, whatever token it sends.
BDRE_TOKEN_MAX_FAILURES_IP = env_int("BDRE_TOKEN_MAX_FAILURES_IP", 20)
BDRE_TOKEN_DAYS = env_int("BDRE_TOKEN_DAYS", 90)
# How long a team invitation waits for its user to accept it (bdre.teams.invite).
BDRE_INVITATION_DAYS = env_int("BDRE_INVITATION_DAYS", 14)
# DRF rates ("number/second|minute|hour|day"): anonymous requests by address, authenticated
# ones by user, and token issuing by password (POST /api/v1/auth/token/) by address.
BDRE_THROTTLE_ANON = env_str("BDRE_THROTTLE_ANON", "60/minute")
BDRE_THROTTLE_USER = env_str("BDRE_THROTTLE_USER", "3000/minute")
BDRE_THROTTLE_TOKEN_ISSUE = env_str("BDRE_THROTTLE_TOKEN_ISSUE", "10/minute")
# Behind a reverse proxy every request comes from the proxy's address: name the header the
# proxy sets (X-Forwarded-For), or one address would lock everybody out.
BDRE_CLIENT_IP_HEADER = env_str("BDRE_CLIENT_IP_HEADER", "")

# --- Encryption at rest -------------------------------------------------------------------
# A comma list of Fernet keys: the first encrypts, all decrypt (key rotation).
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY", "")
if not FIELD_ENCRYPTION_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEY must be set when DEBUG is false (production mode). "
            "Generate one with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        )
    # Development only: a key derived from SECRET_KEY, stable across restarts.
    FIELD_ENCRYPTION_KEY = base64.urlsafe_b64encode(
        hashlib.sha256(b"bdre-field-encryption:" + SECRET_KEY.encode()).digest()
    ).decode()

# --- REST API -----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "bdre.authentication.SafeTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Rates from BDRE_THROTTLE_*, read when a request comes (bdre/throttles.py).
    "DEFAULT_THROTTLE_CLASSES": ["bdre.throttles.AnonThrottle", "bdre.throttles.UserThrottle"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "bdre.filters.FilterBackend",  # relation filters by plain id (bdre/filters.py)
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "bdre.openapi.BdreAutoSchema",  # tags and summaries
    "EXCEPTION_HANDLER": "bdre.api.exception_handler",
    # DRF's parsers with a nesting limit and no NUL characters (bdre/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "bdre.parsers.JSONParser",
        "bdre.parsers.FormParser",
        "bdre.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "BDRE API",
    "DESCRIPTION": "Metadata registry and orchestration engine for incremental batch pipelines.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "bdre.openapi.add_error_answers",
    ],
}

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_DIR = VAR_DIR / "celery"
CELERY_BROKER_TRANSPORT: str | None = None
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's own filesystem transport lets a consumer read a message before it is written
    # (the worker dies of a JSONDecodeError) and loses what a killed worker had not
    # acknowledged; bdre.broker is that transport with both fixed (docs/operations.md).
    CELERY_BROKER_TRANSPORT = "bdre.broker:Transport"
    # One folder for in and out: producer and consumer are different processes on one host.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        # Each consumer's read, unacknowledged messages; same file system as the queue.
        "unacked_folder": str(CELERY_BROKER_DIR / "unacked"),
        "bad_folder": str(CELERY_BROKER_DIR / "bad"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
        # The folder is polled; each hop of a job (run, then each step) waits for the next
        # poll, so the default of a second would add seconds to every job.
        "polling_interval": env_float("CELERY_FILESYSTEM_POLL_SECONDS", 0.1),
    }
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Spark steps have a queue of their own, for workers sized (and placed) for Spark.
BDRE_QUEUE = env_str("BDRE_QUEUE", "celery")
BDRE_SPARK_QUEUE = env_str("BDRE_SPARK_QUEUE", "spark")
# Every Spark queue a step may name (its run.spark_queue), the default one first: pools of
# Spark-queue workers with executors sized differently (SPARK_CONF of their own).
BDRE_SPARK_QUEUES = list(
    dict.fromkeys([BDRE_SPARK_QUEUE, *env_list("BDRE_SPARK_QUEUES", [BDRE_SPARK_QUEUE])])
)
CELERY_TASK_DEFAULT_QUEUE = BDRE_QUEUE
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Task events (sent, started, succeeded, failed), for Flower on the same broker
# (docs/operations.md, "Metrics, JSON logs and Flower").
CELERY_WORKER_SEND_TASK_EVENTS = env_bool("CELERY_WORKER_SEND_TASK_EVENTS", True)
CELERY_TASK_SEND_SENT_EVENT = env_bool("CELERY_TASK_SEND_SENT_EVENT", True)

# --- Spark and the lake -------------------------------------------------------------------
SPARK_MASTER = env_str("SPARK_MASTER", "local[*]")
# A Spark Connect server (sc://host:15002): the steps' session is a Connect client's, with no
# JVM in the worker; SPARK_MASTER, SPARK_UI and SPARK_DRIVER_MEMORY are then the server's own.
SPARK_REMOTE = env_str("SPARK_REMOTE", "")
# The token the Spark Connect server requires of its clients (spark_connect_server refuses to
# start without one; docs/operations.md, "Spark Connect as the cluster's front"): the
# Spark-queue workers send it. The server's JVM holds it (Spark reads it from there, not from
# its configuration, which clients can read back); no other Spark JVM does.
SPARK_CONNECT_TOKEN = env_str("SPARK_CONNECT_TOKEN", "")
SPARK_UI = env_bool("SPARK_UI", False)
# Spark's event log under BDRE_WAREHOUSE/spark-events, for a History Server to read
# (docs/operations.md, "The Spark UI and the event log").
SPARK_EVENT_LOG = env_bool("SPARK_EVENT_LOG", False)
SPARK_SHUFFLE_PARTITIONS = env_int("SPARK_SHUFFLE_PARTITIONS", 0)  # 0: twice the cores
SPARK_DRIVER_MEMORY = env_str("SPARK_DRIVER_MEMORY", "2g")
# Any Spark option for every session BDRE makes, as a JSON object (docs/operations.md, "Spark
# configuration"); it wins over SPARK_CONF_DIR's spark-defaults.conf and BDRE's own defaults
# (on a standalone master, spark.cores.max=1 and the worker's own Python on the executors).
SPARK_CONF = env_spark_conf("SPARK_CONF")
# The S3A connector's jars (hadoop-aws, the AWS SDK), fetched by `make s3a-jars`: every
# session BDRE makes (and a Connect server's) takes them when they are here, unless
# SPARK_CONF brings its own hadoop-aws; empty: never (docs/operations.md, "S3 / object storage").
BDRE_SPARK_JARS_DIR = env_str("BDRE_SPARK_JARS_DIR", str(VAR_DIR / "jars"))
# A running instance without a lease (written by hand) expires this long after its last sign
# of life; runs created by init_job carry their process's lease_seconds.
BDRE_DEFAULT_LEASE_SECONDS = env_int("BDRE_DEFAULT_LEASE_SECONDS", 3600)
# How often a worker renews the leases of the run and step it is working on (and notices
# that the run was terminated); keep it well under the processes' lease_seconds.
BDRE_HEARTBEAT_SECONDS = env_float("BDRE_HEARTBEAT_SECONDS", 10.0)
# The reaper of expired runs, scheduled in Beat.
BDRE_REAPER_SECONDS = env_int("BDRE_REAPER_SECONDS", 60)
# A replaced partition's files (a batch rebuilt and published again) are removed this long
# after the new one was published, so that a query already planned on them can finish;
# a failed attempt's files, which no reader ever saw, at the reaper's next pass
# (docs/quality.md, "Write, audit, publish").
BDRE_PARTITION_GRACE_SECONDS = env_int("BDRE_PARTITION_GRACE_SECONDS", 3600)
# A table's preview (the first rows of a partition, docs/ui.md "Tables") is read by a Spark
# worker on BDRE_SPARK_QUEUE and stopped after this long; one that no worker has started
# after BDRE_PREVIEW_WAIT_SECONDS is given up, and the user may ask again.
BDRE_PREVIEW_SECONDS = env_int("BDRE_PREVIEW_SECONDS", 60)
BDRE_PREVIEW_WAIT_SECONDS = env_int("BDRE_PREVIEW_WAIT_SECONDS", 600)
BDRE_WAREHOUSE = Path(env_str("BDRE_WAREHOUSE", str(VAR_DIR / "warehouse"))).resolve()
# Where new tables are written: empty for team-<id>/<db>/<table> under BDRE_WAREHOUSE, or an
# object store's prefix (s3://bucket/prefix) for the same folders there, through Spark's S3A
# connector (docs/operations.md, "S3 / object storage").
BDRE_TABLE_STORE = env_str("BDRE_TABLE_STORE", "")
# Each team owns <BDRE_LANDING>/team-<id>/ for the files it lands; steps and file
# registrations name locations only inside their team's folders here and under
# BDRE_WAREHOUSE, or inside the root of a Server granted to the team (docs/security.md).
BDRE_LANDING = Path(env_str("BDRE_LANDING", str(VAR_DIR / "landing"))).resolve()
# Step logs (docs/operations.md, "Step logs"): one file per step run, under the warehouse by
# default because the web process must read what the workers wrote; each file keeps its head
# and its tail within the bound; Beat deletes the files older than the retention (0: never).
BDRE_LOG_DIR = Path(env_str("BDRE_LOG_DIR", str(BDRE_WAREHOUSE / "step-logs"))).resolve()
BDRE_STEP_LOG_MAX_BYTES = env_int("BDRE_STEP_LOG_MAX_BYTES", 2 * 1024 * 1024)
BDRE_STEP_LOG_RETENTION_DAYS = env_int("BDRE_STEP_LOG_RETENTION_DAYS", 30)
# The published catalog (docs/operations.md, "The catalog"): BDRE's tables in a Hive
# metastore for users' own Spark sessions. Embedded Derby under BDRE_WAREHOUSE by default;
# BDRE_METASTORE_URL (postgres://user@host:port/db) puts it in PostgreSQL, in its own schema,
# through the JDBC driver jar named here (Debian's libpostgresql-jdbc-java installs it).
BDRE_CATALOG = env_bool("BDRE_CATALOG", True)
BDRE_METASTORE_URL = env_str("BDRE_METASTORE_URL", "")
BDRE_METASTORE_SCHEMA = env_str("BDRE_METASTORE_SCHEMA", "hive_metastore")
BDRE_METASTORE_JDBC_JAR = env_str("BDRE_METASTORE_JDBC_JAR", "/usr/share/java/postgresql.jar")
# Beat checks this often whether a table or partition changed, and syncs if one did; a sync
# happens at least this often anyway (a folder removed outside BDRE leaves no trace in the
# database).
BDRE_CATALOG_SYNC_SECONDS = env_int("BDRE_CATALOG_SYNC_SECONDS", 60)
BDRE_CATALOG_RESYNC_SECONDS = env_int("BDRE_CATALOG_RESYNC_SECONDS", 3600)
# The JDBC driver classes a spark.export step may name (Spark loads the class by its name).
BDRE_JDBC_DRIVERS = env_list(
    "BDRE_JDBC_DRIVERS",
    [
        "org.postgresql.Driver",
        "com.mysql.cj.jdbc.Driver",
        "org.mariadb.jdbc.Driver",
        "com.microsoft.sqlserver.jdbc.SQLServerDriver",
        "oracle.jdbc.OracleDriver",
        "org.apache.derby.jdbc.EmbeddedDriver",
    ],
)
# python.callable steps call only functions defined under these dotted prefixes, matched by
# whole segments (docs/security.md). Development and tests add the tests' step bodies; the
# production image has no tests package.
BDRE_CALLABLES = env_list(
    "BDRE_CALLABLES", ["processes.examples"] + ([] if PRODUCTION else ["tests.processes"])
)

# --- Alerts (docs/operations.md, "Alerts") ------------------------------------------------
# E-mail goes through Django's mail backend: printed on the console unless EMAIL_HOST names
# an SMTP server (or EMAIL_BACKEND another backend).
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "bdre@localhost")
# One alert per (job, kind) in this window; the ones in between are counted and named in the
# next, so a failing schedule does not send a storm.
BDRE_ALERT_MIN_INTERVAL_SECONDS = env_int("BDRE_ALERT_MIN_INTERVAL_SECONDS", 900)
BDRE_ALERT_WEBHOOK_TIMEOUT = env_float("BDRE_ALERT_WEBHOOK_TIMEOUT", 10.0)
# Webhooks go only to hosts whose every address is public, or to the host names and IP
# addresses listed here (an internal chat server, say): a comma list, empty by default
# (docs/security.md, "Outbound requests").
BDRE_ALERT_ALLOWED_HOSTS = env_list("BDRE_ALERT_ALLOWED_HOSTS", [])
# How often Beat checks the runs' SLA and the jobs' freshness.
BDRE_ALERT_CHECK_SECONDS = env_int("BDRE_ALERT_CHECK_SECONDS", 300)
# Sent alerts older than this are deleted by that check (0 keeps them for ever).
BDRE_ALERT_RETENTION_DAYS = env_int("BDRE_ALERT_RETENTION_DAYS", 90)
# Where the UI is served, for the links in alerts (empty: links are paths).
BDRE_BASE_URL = env_str("BDRE_BASE_URL", "").rstrip("/")

# --- OpenLineage --------------------------------------------------------------------------
# Run events (START, COMPLETE, FAIL, ABORT) are emitted by the openlineage-python client
# (lineage/openlineage.py) to an HTTP endpoint (Marquez: http://marquez:5000/api/v1/lineage),
# a file of JSON lines and/or the log. OPENLINEAGE_TRANSPORT names the transports (comma
# separated); empty, they follow from OPENLINEAGE_URL and OPENLINEAGE_FILE. None of them set:
# the client's own configuration (OPENLINEAGE_CONFIG, OPENLINEAGE__TRANSPORT__*) if there is
# one, else no events.
OPENLINEAGE_URL = env_str("OPENLINEAGE_URL", "")
OPENLINEAGE_API_KEY = env_str("OPENLINEAGE_API_KEY", "")
OPENLINEAGE_FILE = env_str("OPENLINEAGE_FILE", "")
OPENLINEAGE_TIMEOUT = env_float("OPENLINEAGE_TIMEOUT", 5.0)
# Retries of an event the endpoint did not take (refused, 5xx), with a short backoff.
OPENLINEAGE_RETRIES = env_int("OPENLINEAGE_RETRIES", 0)
OPENLINEAGE_TRANSPORT = [kind.lower() for kind in env_list("OPENLINEAGE_TRANSPORT", [])]
if set(OPENLINEAGE_TRANSPORT) - {"http", "file", "console"}:
    raise ImproperlyConfigured(
        f"OPENLINEAGE_TRANSPORT must name http, file and/or console, got {OPENLINEAGE_TRANSPORT}"
    )
if "http" in OPENLINEAGE_TRANSPORT and not OPENLINEAGE_URL:
    raise ImproperlyConfigured("OPENLINEAGE_TRANSPORT http needs OPENLINEAGE_URL")
if "file" in OPENLINEAGE_TRANSPORT and not OPENLINEAGE_FILE:
    raise ImproperlyConfigured("OPENLINEAGE_TRANSPORT file needs OPENLINEAGE_FILE")
OPENLINEAGE_NAMESPACE = env_str("OPENLINEAGE_NAMESPACE", "bdre")  # of jobs
OPENLINEAGE_TABLE_NAMESPACE = env_str("OPENLINEAGE_TABLE_NAMESPACE", "bdre-warehouse")

# --- Logging ------------------------------------------------------------------------------
# text (the default) or json: one JSON object per line, each line logged during a step run
# with its run_id and step_run_id (bdre/jsonlog.py; docs/operations.md, "Metrics, JSON logs
# and Flower").
BDRE_LOG_FORMAT = env_str("BDRE_LOG_FORMAT", "text").strip().lower()
if BDRE_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"BDRE_LOG_FORMAT must be text or json, got {BDRE_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_ids": {"()": "bdre.jsonlog.RunIdsFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "bdre.jsonlog.JsonFormatter"},
    },
    "handlers": {
        # The process's own stderr, not whatever sys.stderr is when logging is configured:
        # Celery's Django fixup runs django.setup() again whenever a page lists the tasks
        # (django-celery-beat's form), by then perhaps under a stream that is closed later
        # (a test's capture), and a step's sys.stderr is a proxy into its log
        # (processes/logfiles.py).
        "console": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.__stderr__",
            "formatter": "json" if BDRE_LOG_FORMAT == "json" else "plain",
            "filters": ["run_ids"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # py4j logs every connection it opens and closes to the JVM of Spark at INFO.
    "loggers": {"py4j": {"level": "WARNING"}},
}
# A Celery worker replaces the root logger's handlers with its own text ones; in JSON it
# keeps the handler above, so that its lines (and the steps') are JSON too.
CELERY_WORKER_HIJACK_ROOT_LOGGER = BDRE_LOG_FORMAT != "json"

# --- Metrics (docs/operations.md, "Metrics, JSON logs and Flower") -------------------------
# /metrics answers a request that carries "Authorization: Bearer <BDRE_METRICS_TOKEN>" (when
# set) or comes from an address in BDRE_METRICS_ALLOW (CIDRs; empty: none), and 403 to any
# other: the numbers name every team's jobs, it is an operator's endpoint.
BDRE_METRICS_TOKEN = env_str("BDRE_METRICS_TOKEN", "")
BDRE_METRICS_ALLOW = env_list("BDRE_METRICS_ALLOW", ["127.0.0.1/32", "::1/128"])
for _cidr in BDRE_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"BDRE_METRICS_ALLOW: {_cidr!r} is not a CIDR: {_exc}") from None
# The workers' step durations and counters are kept in files here, one per process, which
# /metrics adds up (prometheus-client's multi-process mode): web and workers of one host must
# share it. prometheus-client reads it from the environment, before its first metric is made.
# Empty: every process keeps its own numbers and /metrics shows only the web process's.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "prometheus"))
if PROMETHEUS_MULTIPROC_DIR:
    PROMETHEUS_MULTIPROC_DIR = str(Path(PROMETHEUS_MULTIPROC_DIR).resolve())
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR
else:  # set but empty would still turn the mode on, with files in the current folder
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)

if PRODUCTION:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
