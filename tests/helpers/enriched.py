"""The enriched-event generator of the tests and benchmarks. It lives in
``processes/sample_events.py`` because ``make demo`` generates its landing files with it."""

from processes.sample_events import (  # noqa: F401
    CONTEXTS_SCHEMA,
    EventFactory,
    fingerprint_of,
    line_of,
)
