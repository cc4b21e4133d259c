# The one BDRE image: the web app, the Celery workers, Beat, and the Spark master, workers
# and Connect server all run from it, so a Spark driver (in a Spark-queue worker) and its
# executors (under a Spark worker) share one Python, one PySpark and BDRE's installed code.
# `python -m bdre.entrypoint ROLE` starts a role (docker-compose.yml, docs/operations.md).
#
#   docker build -t bdre:0.1.0 .

# Build the project's wheel (the templates, linked from bdre/templates, and the static files
# are package data), so that the final image holds the installed package and no source tree
# to shadow it.
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bdre bdre
COPY processes processes
COPY batches batches
COPY lineage lineage
COPY alerts alerts
COPY templates templates
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm

# PySpark 4 runs on Java 17 (Debian's); procps and curl serve the health checks;
# libpostgresql-jdbc-java is the published catalog's PostgreSQL metastore driver
# (/usr/share/java/postgresql.jar, BDRE_METASTORE_JDBC_JAR).
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl \
        libpostgresql-jdbc-java \
    && rm -rf /var/lib/apt/lists/*

# The dependencies are the exact versions pyproject.toml pins (PySpark among them: its
# bin/spark-class and jars run the Spark daemons, SPARK_HOME below).
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels

# Spark's S3A connector for s3:// tables and files (docs/operations.md, "S3 / object
# storage"): hadoop-aws and the AWS SDK, from the package index like everything above, each
# checked against its SHA-256; every Spark session and the Connect server take them.
ENV BDRE_SPARK_JARS_DIR=/opt/bdre/jars
RUN python -m bdre.s3a_jars /opt/bdre/jars

# One user, uid and gid 1000, owns everything the services write: the shared volumes
# (/data: the warehouse; /landing) take this ownership when Docker first mounts them, and
# every service, the Spark daemons and their executors included, runs as this user.
RUN groupadd --gid 1000 bdre \
    && useradd --uid 1000 --gid 1000 --create-home bdre \
    && mkdir -p /data/warehouse /landing /var/lib/bdre \
    && chown -R 1000:1000 /data /landing /var/lib/bdre

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=bdre.settings \
    BDRE_VAR_DIR=/var/lib/bdre \
    BDRE_WAREHOUSE=/data/warehouse \
    BDRE_LANDING=/landing \
    SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark

USER 1000:1000
WORKDIR /var/lib/bdre
EXPOSE 8000 7077 8080 8081 15002
ENTRYPOINT ["python", "-m", "bdre.entrypoint"]
CMD ["web"]
