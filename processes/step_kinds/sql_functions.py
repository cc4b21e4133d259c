"""The Spark SQL functions a ``spark.sql`` step may call, and those it may not with the reason
(docs/sql.md, processes.step_kinds.sql_guard).

An allowlist: a function Spark has that is in neither table is refused by the guard as "not in
the allowed functions", and the completeness test
(tests/processes/step_kinds/test_sql_functions_spark.py) fails for it, so that a Spark upgrade
cannot add a function a team reaches without anyone deciding on it. To allow a function, add
it to its kind in :data:`KINDS` (and, if it takes an options map or a schema, a rule in
:data:`RULES`); the completeness test then runs it on
literals (Spark's own example from ``DESCRIBE FUNCTION EXTENDED``, or one in the test's
``CALLS``) through the guard and through Spark. docs/sql.md holds :func:`markdown_lists` (a
test keeps it so): ``manage.py shell -c "from processes.step_kinds.sql_functions import
markdown_lists; print(markdown_lists())"`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Spark's own grouping of its functions (ExpressionInfo.getGroup), as of Spark 4.3; operators
# and the names of syntax (case, cast, if, in, between, like) are in the registry too, and
# allowed like any function.
KINDS: dict[str, str] = {
    "agg_funcs": """
        any any_value approx_count_distinct approx_percentile approx_top_k
        approx_top_k_accumulate approx_top_k_combine array_agg avg bit_and bit_or
        bit_xor bitmap_and_agg bitmap_construct_agg bitmap_or_agg bool_and bool_or
        collect_list collect_set collect_union corr count count_if count_min_sketch
        covar_pop covar_samp every first first_value grouping grouping_id
        histogram_numeric hll_sketch_agg hll_union_agg kll_merge_agg_bigint
        kll_merge_agg_double kll_merge_agg_float kll_sketch_agg_bigint
        kll_sketch_agg_double kll_sketch_agg_float kurtosis last last_value listagg max
        max_by mean median min min_by mode percentile percentile_approx percentile_cont
        percentile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
        regr_sxx regr_sxy regr_syy skewness some std stddev stddev_pop stddev_samp
        string_agg sum theta_intersection_agg theta_sketch_agg theta_union_agg try_avg
        try_sum tuple_intersection_agg_double tuple_intersection_agg_integer
        tuple_sketch_agg_double tuple_sketch_agg_integer tuple_union_agg_double
        tuple_union_agg_integer var_pop var_samp variance
    """,
    "array_funcs": """
        array array_append array_compact array_contains array_distinct array_except
        array_insert array_intersect array_join array_max array_min array_position
        array_prepend array_remove array_repeat array_size array_union arrays_overlap
        arrays_zip flatten get sequence shuffle slice sort_array
    """,
    "bitwise_funcs": """
        & << >> ^ bit_count bit_get getbit shiftleft shiftright shiftrightunsigned | ~
    """,
    "collection_funcs": """
        cardinality concat element_at reverse size try_element_at
    """,
    "conditional_funcs": """
        between case coalesce if ifnull nanvl nullif nullifzero nvl nvl2 when zeroifnull
    """,
    "conversion_funcs": """
        bigint binary boolean cast date decimal double float int smallint string
        timestamp tinyint
    """,
    "csv_funcs": """
        from_csv schema_of_csv to_csv
    """,
    "datetime_funcs": """
        add_months convert_timezone curdate current_date current_time current_timestamp
        current_timezone date_add date_diff date_format date_from_unix_date date_part
        date_sub date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek
        dayofyear extract from_unixtime from_utc_timestamp hour last_day localtime
        localtimestamp make_date make_dt_interval make_interval make_timestamp
        make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month monthname
        months_between next_day now quarter second session_window time_bucket
        timestamp_micros timestamp_millis timestamp_seconds to_date to_timestamp
        to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc
        try_make_interval try_make_timestamp try_make_timestamp_ltz
        try_make_timestamp_ntz try_to_date try_to_timestamp unix_date unix_micros
        unix_millis unix_seconds unix_timestamp weekday weekofyear window window_time
        year
    """,
    "generator_funcs": """
        collations explode explode_outer inline inline_outer posexplode posexplode_outer
        sql_keywords stack
    """,
    "hash_funcs": """
        crc32 hash md5 sha sha1 sha2 xxhash64
    """,
    "json_funcs": """
        from_json get_json_object json_array_length json_object_keys json_tuple
        schema_of_json to_json
    """,
    "lambda_funcs": """
        aggregate array_sort exists filter forall map_filter map_zip_with reduce
        transform transform_keys transform_values zip_with
    """,
    "map_funcs": """
        map map_concat map_contains_key map_entries map_from_arrays map_from_entries
        map_keys map_values str_to_map
    """,
    "math_funcs": """
        % * + - / abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil
        ceiling conv cos cosh cot csc degrees div e exp expm1 factorial floor greatest
        hex hypot least ln log log10 log1p log2 mod negative pi pmod positive pow power
        radians rand randn random rint round sec sign signum sin sinh sqrt tan tanh
        try_add try_divide try_mod try_multiply try_subtract unhex uniform width_bucket
    """,
    "misc_funcs": """
        aes_decrypt aes_encrypt assert_true bitmap_bit_position bitmap_bucket_number
        bitmap_count current_catalog current_database current_path current_schema
        current_user hmac monotonically_increasing_id raise_error session_user
        spark_partition_id try_aes_decrypt typeof user uuid version
    """,
    "predicate_funcs": """
        ! != < <= <=> <> = == > >= and equal_null ilike in isnan isnotnull isnull like
        not or regexp regexp_like rlike
    """,
    "sketch_funcs": """
        approx_top_k_estimate hll_sketch_estimate hll_union kll_sketch_get_n_bigint
        kll_sketch_get_n_double kll_sketch_get_n_float kll_sketch_get_quantile_bigint
        kll_sketch_get_quantile_double kll_sketch_get_quantile_float
        kll_sketch_get_rank_bigint kll_sketch_get_rank_double kll_sketch_get_rank_float
        kll_sketch_merge_bigint kll_sketch_merge_double kll_sketch_merge_float
        kll_sketch_to_string_bigint kll_sketch_to_string_double
        kll_sketch_to_string_float theta_difference theta_intersection
        theta_sketch_estimate theta_union tuple_difference_double
        tuple_difference_integer tuple_difference_theta_double
        tuple_difference_theta_integer tuple_intersection_double
        tuple_intersection_integer tuple_intersection_theta_double
        tuple_intersection_theta_integer tuple_sketch_estimate_double
        tuple_sketch_estimate_integer tuple_sketch_summary_double
        tuple_sketch_summary_integer tuple_sketch_theta_double
        tuple_sketch_theta_integer tuple_union_double tuple_union_integer
        tuple_union_theta_double tuple_union_theta_integer
    """,
    "st_funcs": """
        st_asbinary st_geogfromwkb st_geomfromwkb st_setsrid st_srid
    """,
    "string_funcs": """
        ascii base64 bit_length btrim char char_length character_length chr collate
        collation concat_ws contains decode elt encode endswith find_in_set
        format_number format_string from_base32 initcap instr is_valid_utf8
        jaro_winkler_similarity lcase left len length levenshtein locate lower lpad
        ltrim luhn_check make_valid_utf8 mask octet_length overlay position printf quote
        randstr regexp_count regexp_extract regexp_extract_all regexp_instr
        regexp_replace regexp_substr repeat replace right rpad rtrim sentences soundex
        space split split_part startswith substr substring substring_index to_base32
        to_binary to_char to_number to_varchar translate trim try_to_binary
        try_to_number try_validate_utf8 ucase unbase64 upper validate_utf8 ||
    """,
    "struct_funcs": """
        named_struct struct
    """,
    "table_funcs": """
        range
    """,
    "url_funcs": """
        parse_url try_parse_url try_url_decode url_decode url_encode
    """,
    "variant_funcs": """
        is_valid_variant is_variant_null parse_json schema_of_variant
        schema_of_variant_agg to_variant_object try_parse_json try_variant_array_append
        try_variant_get try_variant_insert try_variant_set variant_array_append
        variant_delete variant_explode variant_explode_outer variant_get variant_insert
        variant_set variant_strip_nulls
    """,
    "vector_funcs": """
        vector_avg vector_cosine_similarity vector_inner_product vector_l2_distance
        vector_norm vector_normalize vector_sum
    """,
    "window_funcs": """
        counter_diff cume_dist dense_rank lag lead nth_value ntile percent_rank rank
        row_number
    """,
    "xml_funcs": """
        from_xml schema_of_xml to_xml xpath xpath_boolean xpath_double xpath_float
        xpath_int xpath_long xpath_number xpath_short xpath_string
    """,
}

TITLES = {
    "agg_funcs": "Aggregates",
    "array_funcs": "Arrays",
    "bitwise_funcs": "Bitwise operators",
    "collection_funcs": "Collections",
    "conditional_funcs": "Conditionals",
    "conversion_funcs": "Casts and conversions",
    "csv_funcs": "CSV",
    "datetime_funcs": "Dates and times",
    "generator_funcs": "Generators (explode, inline, stack)",
    "hash_funcs": "Hashes",
    "json_funcs": "JSON",
    "lambda_funcs": "Higher-order (lambda) functions",
    "map_funcs": "Maps",
    "math_funcs": "Arithmetic and mathematics",
    "misc_funcs": "Miscellaneous",
    "predicate_funcs": "Predicates and comparisons",
    "sketch_funcs": "Sketches (HLL, KLL, theta, tuple)",
    "st_funcs": "Geospatial",
    "string_funcs": "Strings",
    "struct_funcs": "Structs",
    "table_funcs": "Table functions",
    "url_funcs": "URLs",
    "variant_funcs": "Variant",
    "vector_funcs": "Vectors",
    "window_funcs": "Window functions",
    "xml_funcs": "XML",
}


@dataclass(frozen=True)
class Options:
    """The rule of a parsing function (from_json, from_csv, from_xml, to_*, schema_of_*):
    every argument after the first (the data) is a literal (a DDL schema), a ``schema_of_*``
    call, or an options map written ``map('key', 'value', ...)`` whose keys (compared as
    Spark does, without case) are in ``keys`` and whose values are literals. Nothing else:
    Spark builds the options from any constant map (``str_to_map(...)``), which the guard
    could not read, and an option can name a path (``rowValidationXSDPath``)."""

    keys: frozenset[str]
    refused: dict[str, str] = field(default_factory=dict)


_COMMON_OPTIONS = frozenset(
    {
        "mode",
        "columnNameOfCorruptRecord",
        "dateFormat",
        "timestampFormat",
        "timestampNTZFormat",
        "enableDateTimeParsingFallback",
        "timeZone",
        "locale",
        "encoding",
        "charset",
        "lineSep",
        "samplingRatio",
        "prefersDecimal",
        "ignoreNullFields",
    }
)
JSON_OPTIONS = _COMMON_OPTIONS | {
    "primitivesAsString",
    "allowComments",
    "allowUnquotedFieldNames",
    "allowSingleQuotes",
    "allowNumericLeadingZeros",
    "allowNonNumericNumbers",
    "allowBackslashEscapingAnyCharacter",
    "allowUnquotedControlChars",
    "multiLine",
    "dropFieldIfAllNull",
    "inferTimestamp",
    "pretty",
    "writeNonAsciiCharacterAsCodePoint",
    "sortKeys",
}
CSV_OPTIONS = _COMMON_OPTIONS | {
    "sep",
    "delimiter",
    "quote",
    "escape",
    "charToEscapeQuoteEscaping",
    "comment",
    "header",
    "enforceSchema",
    "inferSchema",
    "ignoreLeadingWhiteSpace",
    "ignoreTrailingWhiteSpace",
    "nullValue",
    "nanValue",
    "positiveInf",
    "negativeInf",
    "maxColumns",
    "maxCharsPerColumn",
    "multiLine",
    "emptyValue",
    "quoteAll",
    "escapeQuotes",
    "unescapedQuoteHandling",
    "preferDate",
}
XML_OPTIONS = _COMMON_OPTIONS | {
    "rowTag",
    "rootTag",
    "attributePrefix",
    "valueTag",
    "ignoreSurroundingSpaces",
    "ignoreNamespace",
    "nullValue",
    "wildcardColName",
    "excludeAttribute",
    "inferSchema",
    "arrayElementName",
    "declaration",
    "validateName",
    "indent",
}
# An option that names storage is no option of a step: Spark opens it with the worker's reach.
XML_REFUSED_OPTIONS = {
    "rowValidationXSDPath": (
        "it names an XSD file the worker opens, and the XSD's external DTDs and entities "
        "then read any file or URL the worker reaches"
    ),
}

RULES: dict[str, Options] = {
    "from_json": Options(JSON_OPTIONS),
    "to_json": Options(JSON_OPTIONS),
    "schema_of_json": Options(JSON_OPTIONS),
    "from_csv": Options(CSV_OPTIONS),
    "to_csv": Options(CSV_OPTIONS),
    "schema_of_csv": Options(CSV_OPTIONS),
    "from_xml": Options(XML_OPTIONS, XML_REFUSED_OPTIONS),
    "to_xml": Options(XML_OPTIONS, XML_REFUSED_OPTIONS),
    "schema_of_xml": Options(XML_OPTIONS, XML_REFUSED_OPTIONS),
}

# The reasons, one per kind of harm: docs/sql.md groups the refused functions by them.
CALLS_JAVA = (
    "it calls any static Java method the worker's JVM has (the environment, files, processes)"
)
LOADS_SCHEMA = (
    "its schema or options name a file, a URL (avroSchemaUrl) or a Java class that the worker "
    "reads or loads, and its module is not part of the sandbox"
)
FILE_PATHS = "it reveals the storage paths of the files a query reads; read tables by name"
READS_FILES = "it reads files by path; read registered tables by name"
SHARED_LOGS = "it reads the session's Python worker logs, which other teams' steps share"
BUILDS_NAMES = (
    "it builds a table, column or function name from a string at run time, which the guard "
    "cannot check"
)
METRIC_VIEWS = "it computes a measure of a metric view, and a step cannot define one"
SWITCHED_OFF = (
    "this Spark has its type switched off (TIME: spark.sql.timeType.enabled, nanosecond "
    "timestamps: spark.sql.timestampNanosTypes.enabled), so no call runs; decide on it when a "
    "Spark version turns the type on"
)
UNPARSED = "the guard's parser (sqlglot) cannot read it; shiftrightunsigned(a, b) is the same"

REFUSED: dict[str, str] = {
    "reflect": CALLS_JAVA,
    "java_method": CALLS_JAVA,
    "try_reflect": CALLS_JAVA,
    "from_avro": LOADS_SCHEMA,
    "to_avro": LOADS_SCHEMA,
    "schema_of_avro": LOADS_SCHEMA,
    "from_protobuf": LOADS_SCHEMA,
    "to_protobuf": LOADS_SCHEMA,
    "input_file_name": FILE_PATHS,
    "input_file_block_start": FILE_PATHS,
    "input_file_block_length": FILE_PATHS,
    "read_files": READS_FILES,
    "python_worker_logs": SHARED_LOGS,
    "identifier": BUILDS_NAMES,
    "measure": METRIC_VIEWS,
    ">>>": UNPARSED,
    **dict.fromkeys(
        [
            "make_time",
            "time",
            "time_diff",
            "time_from_micros",
            "time_from_millis",
            "time_from_seconds",
            "time_to_micros",
            "time_to_millis",
            "time_to_seconds",
            "time_trunc",
            "to_time",
            "try_to_time",
            "timestamp_nanos",
            "unix_nanos",
        ],
        SWITCHED_OFF,
    ),
}

ALLOWED: dict[str, Options | None] = {
    name: RULES.get(name) for names in KINDS.values() for name in names.split()
}
# Optimizer hints (/*+ BROADCAST(t) */) are written like calls; these are Spark's, and change
# only how a query runs.
HINTS = frozenset(
    {
        "broadcast",
        "broadcastjoin",
        "mapjoin",
        "merge",
        "shuffle_merge",
        "mergejoin",
        "shuffle_hash",
        "shuffle_replicate_nl",
        "coalesce",
        "repartition",
        "repartition_by_range",
        "rebalance",
    }
)


def kind_of(name: str) -> str:
    """The kind (a key of :data:`KINDS`) of an allowed function."""
    return next(kind for kind, names in KINDS.items() if name in names.split())


def markdown_lists() -> str:
    """The function lists of docs/sql.md: the allowed functions by kind, the refused ones by
    reason."""
    lines = ["### Allowed functions", ""]
    for kind, names in sorted(KINDS.items(), key=lambda item: TITLES[item[0]]):
        shown = ", ".join(f"`{n}`" for n in sorted(names.split()))
        lines += [f"**{TITLES[kind]}** ({len(names.split())}): {shown}", ""]
    lines += ["### Refused functions", ""]
    by_reason: dict[str, list[str]] = {}
    for name, reason in REFUSED.items():
        by_reason.setdefault(reason, []).append(name)
    for reason, refused in by_reason.items():
        lines.append(f"- {', '.join(f'`{n}`' for n in sorted(refused))}: {reason}.")
    return "\n".join(lines) + "\n"
