# The whole set-up on a fresh machine is `make demo` or `make test`.
PYTHON ?= python3
# Python keeps compiled modules (__pycache__, ignored by git) even where the environment says
# not to: the suite starts hundreds of Python processes (test processes, `manage.py`, workers)
# that would each compile this checkout's code again, and pytest rewrite every test module's
# asserts again (about 10 CPU-s a test process on the 2-core machine: docs/testing.md, "CI").
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install test test-fast test-database demo cluster s3a-jars spark-classes lint format migrate migrations clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "BDRE needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The suite in TEST_PROCESSES processes side by side (pytest-xdist, a module's tests in one
# process, so that its module-scoped data is built once): most of its time is spent
# waiting on JVMs, workers, browsers and subprocesses, not on the 2 cores; the fast tests wait
# on nothing, so one process a core (docs/testing.md has the measurements).
TEST_PROCESSES ?= 3
FAST_PROCESSES ?= 2

test: install spark-classes test-database
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The inner loop: every test that needs no Spark, Celery worker, browser, PostgreSQL or cluster
# (the markers in pyproject.toml; docs/testing.md). `make test` stays the whole suite.
FAST_TESTS := not spark and not worker and not browser and not postgres and not cluster

test-fast: install test-database
	$(PY) -m pytest -n $(FAST_PROCESSES) --dist loadfile --no-loadscope-reorder -m "$(FAST_TESTS)" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

migrations: install
	$(PY) manage.py makemigrations
	$(VENV)/bin/ruff format -q */migrations

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

migrate: install
	$(PY) manage.py migrate --noinput

# Sets up the demo, runs the pipeline through an embedded Celery worker with Beat (filesystem
# broker, SQLite), prints what happened, then serves the UI while the worker keeps running.
demo: migrate
	$(PY) manage.py demo --serve

# A standalone Spark master and worker on 127.0.0.1 from the PySpark wheel, in the foreground
# until Ctrl-C; then, in another shell, `SPARK_MASTER=spark://127.0.0.1:7077 make demo`.
# CLUSTER_ARGS="--connect" starts a Spark Connect server on it too (docs/operations.md).
cluster: migrate
	$(PY) manage.py spark_cluster $(CLUSTER_ARGS)

# Spark's S3A connector (hadoop-aws and the AWS SDK) for s3:// tables and files, into
# BDRE_SPARK_JARS_DIR (var/jars); every Spark session takes them from there (docs/operations.md,
# "S3 / object storage"). The Spark tests fetch them too.
s3a-jars: install
	$(PY) manage.py s3a_jars

# The class-data archive of Spark's JVM that the suite's JVMs start from (about 30 s, once per
# Java and PySpark, in var/jars): tests/helpers/jvm_archive.py. The tests run without it too.
spark-classes: install
	$(PY) -m tests.helpers.jvm_archive

# The test database migrated once, for every test process to start from a copy of it
# (tests/helpers/migrated.py); again only when a migration changes.
test-database: install
	$(PY) -m tests.helpers.migrated

clean:
	rm -rf $(VENV) var
