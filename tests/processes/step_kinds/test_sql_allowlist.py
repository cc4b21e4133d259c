"""The Spark SQL guard is an allowlist (processes.step_kinds.sql_guard, sql_functions,
docs/sql.md). Without Spark: the attacks as written, the forms that would hide a refused
function, the options of the parsing functions, and the queries a team writes (and the
demo's) still passing. The same against Spark's own registry: test_sql_functions_spark.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from processes import demo
from processes.step_kinds.sql_functions import ALLOWED, REFUSED, markdown_lists
from processes.step_kinds.sql_guard import RefusedStatement, check_query, check_statement

ROOT = Path(__file__).resolve().parents[3]

ATTACK_1 = (
    "SELECT from_xml('<r>zz</r>', 'r STRING', "
    "map('rowValidationXSDPath', '/some/evil.xsd', 'mode', 'FAILFAST'))"
)
ATTACK_2 = "SELECT raise_error(concat('${env:HOME}', ' ', '${spark:spark.sql.warehouse.dir}'))"
ATTACK_3 = "SELECT 1 AS a, ${x/*} reflect('java.lang.System','getProperty','user.home') AS b ${y*/}"


def refused(statement: str) -> str:
    with pytest.raises(RefusedStatement, match="Spark SQL refused") as caught:
        check_statement(statement)
    return caught.value.reason


def test_attack_1_an_xsd_path_in_from_xml_options_is_refused_by_its_option():
    reason = refused(ATTACK_1)
    assert "rowValidationXSDPath" in reason and "XSD file" in reason


def test_attack_2_variable_substitution_of_the_environment_and_settings_is_refused():
    assert "${ is not allowed" in refused(ATTACK_2)


def test_attack_3_text_hidden_from_the_parser_by_a_substitution_is_refused():
    assert "${ is not allowed" in refused(ATTACK_3)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT '${env:SECRET_KEY}' AS k",
        "SELECT 1 AS a -- ${system:user.home}",
        "SELECT 1 AS a /* ${spark:spark.sql.warehouse.dir} */",
        "SELECT `${x}` FROM lake.t",
        "SELECT ${hivevar:x}",
    ],
)
def test_a_substitution_anywhere_in_the_statement_is_refused(statement):
    assert "${" in refused(statement)


@pytest.mark.parametrize(
    ("statement", "name"),
    [
        ("SELECT reflect('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT java_method('java.lang.System', 'getenv', 'PATH')", "java_method"),
        ("SELECT try_reflect('java.lang.System', 'getenv', 'PATH')", "try_reflect"),
        ("SELECT ReFlEcT('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT `reflect`('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT system.builtin.reflect('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT builtin.reflect('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT `system`.`builtin`.`java_method`('java.lang.System', 'getenv')", "java_method"),
        ("SELECT reflect /* hidden */ ('java.lang.System', 'getenv', 'PATH')", "reflect"),
        ("SELECT reflect\n('java.lang.System', 'getenv', 'PATH')", "reflect"),
        (
            "SELECT a FROM lake.t WHERE a = java_method('java.lang.System', 'exit', 1)",
            "java_method",
        ),
        ("SELECT input_file_name() AS f FROM lake.t", "input_file_name"),
        ("SELECT input_file_block_start() FROM lake.t", "input_file_block_start"),
        ("SELECT from_avro(b, '{}', map('avroSchemaUrl', 'http://10.0.0.1/')) FROM t", "from_avro"),
        ("SELECT from_protobuf(b, 'M', '/srv/desc.pb') FROM t", "from_protobuf"),
        ("SELECT to_protobuf(s, 'com.evil.Message') FROM t", "to_protobuf"),
        ("SELECT * FROM python_worker_logs()", "python_worker_logs"),
        ("SELECT * FROM read_files('/etc/passwd')", "read_files"),
        ("SELECT * FROM IDENTIFIER('text.`/etc/passwd`')", "identifier"),
    ],
)
def test_a_refused_function_is_refused_by_name_with_its_reason(statement, name):
    reason = refused(statement)
    assert f"function {name} is not allowed: {REFUSED[name]}" == reason


@pytest.mark.parametrize(
    ("statement", "name"),
    [
        ("SELECT no_such_function(1)", "no_such_function"),
        ("SELECT my_udf(a) FROM lake.t", "my_udf"),
        ("SELECT * FROM some_table_function(1)", "some_table_function"),
    ],
)
def test_a_function_not_in_the_allowlist_is_refused_by_name_and_says_whom_to_ask(statement, name):
    reason = refused(statement)
    assert reason == (
        f"function {name} is not in the allowed functions (docs/sql.md); "
        "ask your installation's admin"
    )


def test_an_allowed_function_by_a_qualified_name_is_refused():
    assert "qualified name" in refused("SELECT system.builtin.abs(-1)")


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        # options Spark builds from any constant map: the guard reads only map(...)
        ("SELECT from_json(j, 'a INT', str_to_map('mode:FAILFAST')) FROM t", "map('key'"),
        (
            "SELECT from_xml(x, 'r STRING', map_from_arrays(array('rowValidationXSDPath'), "
            "array('/x.xsd'))) FROM t",
            "map('key'",
        ),
        (
            "SELECT from_xml(x, 'r STRING', map(concat('rowValidation', 'XSDPath'), '/x')) FROM t",
            "literal string",
        ),
        ("SELECT from_xml(x, 'r STRING', map('ROWVALIDATIONXSDPATH', '/x')) FROM t", "XSD file"),
        ("SELECT schema_of_xml(x, map('rowValidationXSDPath', '/x')) FROM t", "XSD file"),
        ("SELECT from_json(j, 'a INT', map('mode', concat('FAIL', 'FAST'))) FROM t", "literal"),
        ("SELECT from_csv(c, 'a INT', map('someNewOption', 'x')) FROM t", "someNewOption"),
        ("SELECT from_json(j, s) FROM t", "schema must be a literal"),
    ],
)
def test_a_parsing_function_takes_only_listed_options_with_literal_values(statement, words):
    assert words.lower() in refused(statement).lower()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1 AS a FROM lake.t WHERE a = ?",
        "SELECT :name AS a",
        "SELECT /*+ EVIL(t) */ a FROM lake.t",
    ],
)
def test_what_is_no_part_of_a_query_is_refused_by_its_kind(statement):
    refused(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT get_json_object(payload, '$.a.b') AS a, "
        "from_json(payload, 'a INT, b ARRAY<STRING>', map('mode', 'PERMISSIVE')) AS parsed, "
        "from_csv(line, 'x INT, y STRING', map('sep', ';', 'header', 'false')) AS row, "
        "to_json(named_struct('a', 1)) AS j, json_tuple(payload, 'a') "
        "FROM lake.events",
        "SELECT from_json(j, schema_of_json('{\"a\": 1}')) FROM lake.events",
        "SELECT from_xml(x, 'r STRING', map('rowTag', 'r', 'mode', 'FAILFAST')) FROM lake.x",
        "SELECT date_trunc('DAY', ts) AS day, date_format(ts, 'yyyy-MM') AS month, "
        "datediff(current_date(), to_date(ts)) AS age, year(ts), add_months(ts, 1), "
        "from_unixtime(unix_timestamp(ts)), current_timestamp(), date '2024-01-01' "
        "FROM lake.events",
        "SELECT lower(trim(name)), concat_ws('-', a, b), regexp_extract(s, '([0-9]+)', 1), "
        "substring(s, 1, 3), split(s, ','), upper(s) || '!', nvl(a, 0), ifnull(b, 0), "
        "coalesce(a, b), CAST(a AS BIGINT), a::string, if(a > 0, 'p', 'n') FROM lake.t",
        "SELECT cust, percentile_approx(amount, 0.5), approx_count_distinct(id), "
        "collect_list(id), count(DISTINCT id), sum(amount) FILTER (WHERE amount > 0) "
        "FROM lake.orders GROUP BY cust HAVING count(*) > 1 ORDER BY cust LIMIT 10",
        "SELECT id, sum(amount) OVER (PARTITION BY cust ORDER BY ts ROWS BETWEEN "
        "UNBOUNDED PRECEDING AND CURRENT ROW) AS running, ntile(4) OVER (ORDER BY amount) "
        "FROM lake.orders",
        "SELECT transform(items, x -> x.price * 2), filter(items, x -> x.price > 1), "
        "aggregate(prices, 0D, (acc, p) -> acc + p), size(items), items[0], m['k'] "
        "FROM lake.t",
        "SELECT * FROM lake.a LEFT JOIN lake.b USING (id) "
        "WHERE NOT EXISTS (SELECT 1 FROM lake.c WHERE c.id = a.id) "
        "UNION SELECT * FROM lake.d INTERSECT SELECT * FROM lake.e",
        "SELECT /*+ BROADCAST(b) */ a.id FROM lake.a a JOIN lake.b b ON a.id = b.id",
        "SELECT * FROM lake.t LATERAL VIEW OUTER posexplode(items) e AS pos, item",
        "SELECT * FROM range(10)",
        "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(id, name)",
        "SELECT current_user(), current_database(), version()",
    ],
)
def test_a_normal_analytic_query_passes(statement):
    check_statement(statement)


def test_placeholders_of_a_registered_query_are_no_substitution():
    check_query("SELECT * FROM lake.t WHERE batch_id IN ({batch_ids}) AND b = {target_batch_id}")


@pytest.mark.django_db
def test_every_sql_statement_of_the_demo_passes_the_guard():
    from processes.models import Property

    demo.set_up_demo()
    queries = list(
        Property.objects.filter(config_group="sql", key="query").values_list("value", flat=True)
    )
    assert demo.DAILY_QUERY in queries
    for query in queries:
        check_query(query)


def test_docs_sql_lists_every_allowed_and_refused_function():
    text = (ROOT / "docs" / "sql.md").read_text()
    assert markdown_lists() in text, (
        "docs/sql.md's function lists are not sql_functions.markdown_lists(): paste them in"
    )
    assert [name for name in [*ALLOWED, *REFUSED] if f"`{name}`" not in text] == []
