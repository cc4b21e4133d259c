"""The Spark SQL sandbox's check of a statement (``processes.step_kinds.sql_guard``), without Spark:
each form an attacker would write is refused with its reason, and semantic queries pass."""

from __future__ import annotations

import pytest

from processes.step_kinds.sql_guard import RefusedStatement, check_query, check_statement

REFUSED = [
    # script transforms run a program on the worker
    ("SELECT TRANSFORM(line) USING 'sh -c \"cat /etc/passwd\"' AS (out) FROM lake.t", "TRANSFORM"),
    ("SELECT TRANSFORM(*) USING 'cat' FROM lake.t", "TRANSFORM"),
    ("MAP line USING 'cat' AS (out) FROM lake.t", "cannot be parsed"),
    # path-based data sources read any file the worker can read
    ("SELECT * FROM text.`file:///etc/passwd`", "by path"),
    ("SELECT * FROM parquet.`/srv/warehouse/other_team/orders`", "by path"),
    ("SELECT * FROM csv.`/etc/passwd`", "by path"),
    ("SELECT * FROM json.`/etc/passwd`", "by path"),
    ("SELECT * FROM orc.`/srv/warehouse`", "by path"),
    ("SELECT * FROM binaryFile.`/srv/bdre/settings.py`", "by path"),
    ("SELECT * FROM `TEXT`.`/etc/passwd`", "by path"),
    ("SELECT * FROM avro.`s3a://bucket/x`", "by path"),
    ("SELECT * FROM `org.apache.spark.sql.parquet`.`x`", "by path"),
    ("SELECT * FROM spark_catalog.parquet.`/x`", "by path"),
    ("SELECT * FROM `file:///etc/passwd`", "by path"),
    ("SELECT * FROM lake.t WHERE id IN (SELECT id FROM json.`/etc/x`)", "by path"),
    ("WITH p AS (SELECT * FROM text.`/etc/passwd`) SELECT * FROM p", "by path"),
    ("SELECT * FROM lake.t JOIN text.`/etc/passwd` p ON true", "by path"),
    ("SELECT * FROM IDENTIFIER('text.`/etc/passwd`')", "identifier"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files"),
    # LOCATION, jars, files
    ("CREATE TABLE x LOCATION '/srv/warehouse/other' AS SELECT 1 AS a", "LOCATION"),
    ("CREATE TABLE x (a INT) USING parquet LOCATION 'file:///tmp/x'", "LOCATION"),
    ("ADD JAR /tmp/evil.jar", "ADD JAR"),
    ("add file /etc/passwd", "ADD JAR"),
    ("ADD ARCHIVE /tmp/x.zip", "ADD JAR"),
    ("CREATE FUNCTION pwn AS 'com.evil.Udf' USING JAR '/tmp/evil.jar'", "USING JAR"),
    ("CREATE TEMPORARY FUNCTION pwn AS 'com.evil.Udf' USING JAR 'file:///tmp/e.jar'", "USING JAR"),
    # reflection calls any static Java method
    ("SELECT reflect('java.lang.Runtime', 'getRuntime')", "reflect"),
    ("SELECT java_method('java.lang.System', 'getenv', 'SECRET_KEY')", "java_method"),
    ("SELECT try_reflect('java.lang.System', 'getProperty', 'user.home')", "try_reflect"),
    ("SELECT `REFLECT`('java.util.UUID', 'randomUUID')", "reflect"),
    ("SELECT a FROM lake.t WHERE a = java_method('java.lang.System', 'exit', 1)", "java_method"),
    # settings can lift the sandbox
    ("SET spark.sql.runSQLOnFiles=true", "SET"),
    ("set spark.sql.runSQLOnFiles = true", "SET"),
    ("RESET", "RESET"),
    ("RESET spark.sql.runSQLOnFiles", "RESET"),
    # DDL and DML: the step writes its own output
    ("INSERT INTO lake.orders SELECT * FROM lake.orders", "DDL and DML"),
    ("INSERT OVERWRITE TABLE lake.orders SELECT 1", "DDL and DML"),
    ("WITH x AS (SELECT 1 AS a) INSERT INTO lake.t SELECT * FROM x", "DDL and DML"),
    ("CREATE TABLE lake.x AS SELECT 1 AS a", "DDL and DML"),
    ("CREATE VIEW v AS SELECT * FROM lake.t", "DDL and DML"),
    ("DROP TABLE lake.orders", "single SELECT"),
    ("ALTER TABLE lake.orders SET LOCATION '/tmp'", "not ALTER"),
    ("TRUNCATE TABLE lake.orders", "single SELECT"),
    ("DELETE FROM lake.orders", "DDL and DML"),
    ("CACHE TABLE lake.orders", "single SELECT"),
    ("USE other_team", "single SELECT"),
    ("LIST JARS", "single SELECT"),
    ("SELECT 1; SELECT * FROM text.`/etc/passwd`", "one statement"),
    ("SELECT 1; DROP TABLE lake.orders", "one statement"),
    ("", "one statement may run, not 0"),
    ("-", "cannot be parsed"),
]


@pytest.mark.parametrize(("statement", "reason"), REFUSED)
def test_a_statement_outside_the_sandbox_is_refused_with_its_reason(statement, reason):
    with pytest.raises(RefusedStatement, match="Spark SQL refused") as refused:
        check_statement(statement)
    assert reason.lower() in refused.value.reason.lower()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT to_date(collector_tstamp) AS day, count(*) AS views FROM lake.atomic_events "
        "WHERE batch_id IN (1, 2) GROUP BY 1",
        "WITH o AS (SELECT * FROM lake.orders WHERE amount > 0) "
        "SELECT c.name, sum(o.amount) AS total FROM o JOIN lake.customers c ON o.cid = c.id "
        "GROUP BY c.name HAVING sum(o.amount) > 10 ORDER BY total DESC",
        "SELECT id, row_number() OVER (PARTITION BY cid ORDER BY ts) AS n, "
        "lag(amount) OVER (PARTITION BY cid ORDER BY ts) AS previous FROM lake.orders",
        "SELECT a FROM lake.x UNION ALL SELECT a FROM lake.y",
        "SELECT * FROM lake.t LATERAL VIEW explode(items) e AS item",
        "SELECT CASE WHEN a > 1 THEN 'big' ELSE 'small' END AS size, "
        "coalesce(b, 'none') AS b FROM lake.t WHERE a IN (SELECT a FROM lake.u)",
        "SELECT get_json_object(payload, '$.a') AS a, from_json(payload, 'a INT') AS parsed "
        "FROM lake.events",
        "SELECT 1 AS one;",
        "SELECT count(*) FROM `lake`.`orders` /* a comment: SET x=1 */",
    ],
)
def test_a_semantic_query_over_registered_tables_passes(statement):
    check_statement(statement)


def test_placeholders_are_rendered_before_the_check():
    check_query("SELECT * FROM lake.t WHERE batch_id IN ({batch_ids}) AND b = {target_batch_id}")
    with pytest.raises(RefusedStatement, match="by path"):
        check_query("SELECT * FROM text.`/etc/passwd` WHERE 1 IN ({batch_ids})")
