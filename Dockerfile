# The BDRE image: the web app, the Celery workers and Beat all run from it.
FROM python:3.11-slim-bookworm

# PySpark 4 needs Java 17.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BDRE_VAR_DIR=/var/lib/bdre \
    BDRE_WAREHOUSE=/var/lib/bdre/warehouse

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bdre bdre
COPY processes processes
COPY batches batches
COPY lineage lineage
COPY manage.py ./
RUN pip install --no-cache-dir .

RUN useradd --create-home bdre && mkdir -p /var/lib/bdre && chown bdre /var/lib/bdre
USER bdre
EXPOSE 8000
CMD ["gunicorn", "bdre.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
