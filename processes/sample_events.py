"""Snowplow enriched-event TSV for tests, benchmarks and the demo, made on the fly.

``EventFactory`` writes lines of 131 tab-separated fields with natural duplicates (the same
event again), synthetic duplicates (the same event id, another payload), events repeated
from an earlier batch, malformed lines, null fingerprints, and quotes and JSON inside fields.
Everything is derived from a seed, so a run is reproducible.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from processes.step_kinds.enriched_fields import FIELDS, INDEX

CONTEXTS_SCHEMA = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1"
UNSTRUCT_SCHEMA = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0"
PAGE_SCHEMA = "iglu:com.acme/page/jsonschema/1-0-0"
USER_SCHEMA = "iglu:com.acme/user/jsonschema/2-1-0"
LINK_CLICK_SCHEMA = "iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1"
UA_SCHEMA = "iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0"


def line_of(values: dict[str, str]) -> str:
    row = [""] * len(FIELDS)
    for name, value in values.items():
        row[INDEX[name]] = value
    return "\t".join(row)


def fingerprint_of(values: dict[str, str]) -> str:
    payload = "|".join(f"{k}={values[k]}" for k in sorted(values) if k not in ("etl_tstamp",))
    return hashlib.md5(payload.encode(), usedforsecurity=False).hexdigest()


@dataclass
class EventFactory:
    seed: int = 1
    start: datetime = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    rng: random.Random = field(init=False)
    counter: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def event_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def event(
        self,
        *,
        event_id: str | None = None,
        kind: str | None = None,
        fingerprint: bool = True,
        etl_offset_s: int = 0,
    ) -> dict[str, str]:
        self.counter += 1
        at = self.start + timedelta(seconds=self.counter)
        kind = kind or self.rng.choice(["page_view", "page_view", "struct", "unstruct"])
        values = {
            "app_id": "shop",
            "platform": "web",
            "etl_tstamp": (self.start + timedelta(hours=1, seconds=etl_offset_s)).strftime(
                "%Y-%m-%d %H:%M:%S.%f"
            )[:-3],
            "collector_tstamp": at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            "dvce_created_tstamp": at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            "event": kind,
            "event_id": event_id or self.event_id(),
            "name_tracker": "js",
            "v_tracker": "js-3.1.0",
            "v_collector": "ssc-2.8.0",
            "v_etl": "enrich-3.9.0",
            "user_id": f"user-{self.rng.randrange(1000)}",
            "user_ipaddress": f"10.0.{self.rng.randrange(255)}.{self.rng.randrange(255)}",
            "domain_userid": uuid.UUID(int=self.rng.getrandbits(128)).hex[:16],
            "page_url": f"https://shop.example/p/{self.rng.randrange(500)}",
            # Quotes inside a field: a CSV reader would merge fields here.
            "page_title": f'"Deal" of the day {self.rng.randrange(50)} - 20" TV',
            "useragent": 'Mozilla/5.0 (X11; Linux x86_64) "Test"',
            "contexts": self._contexts(),
            "derived_contexts": json.dumps(
                {
                    "schema": CONTEXTS_SCHEMA,
                    "data": [{"schema": UA_SCHEMA, "data": {"useragentFamily": "Firefox"}}],
                }
            ),
        }
        values.update(self._fields_of(kind))
        if fingerprint:
            values["event_fingerprint"] = fingerprint_of(values)
        return values

    def _contexts(self) -> str:
        """A page context, and a user context every other event or so (the generator's
        draws in the order they always were: the sample files stay the same)."""
        contexts = [{"schema": PAGE_SCHEMA, "data": {"category": self.rng.choice(["news", "tv"])}}]
        if self.rng.random() < 0.5:
            age = self.rng.randrange(18, 90)
            contexts.append({"schema": USER_SCHEMA, "data": {"tier": "gold", "age": age}})
        return json.dumps({"schema": CONTEXTS_SCHEMA, "data": contexts})

    def _fields_of(self, kind: str) -> dict[str, str]:
        """What a structured event (its category, action, value) or a self-describing one
        (a link click) adds."""
        if kind == "struct":
            return {
                "se_category": "cart",
                "se_action": "add",
                "se_value": str(self.rng.randrange(100)),
            }
        if kind == "unstruct":
            link_click = {"schema": LINK_CLICK_SCHEMA, "data": {"targetUrl": "https://x.example"}}
            return {
                "unstruct_event": json.dumps({"schema": UNSTRUCT_SCHEMA, "data": link_click}),
                "event_vendor": "com.snowplowanalytics.snowplow",
                "event_name": "link_click",
                "event_format": "jsonschema",
                "event_version": "1-0-1",
            }
        return {}

    def batch(
        self,
        n: int,
        *,
        natural: float = 0.0,
        synthetic: float = 0.0,
        malformed: float = 0.0,
        null_fingerprint: float = 0.0,
        repeat_from: list[dict[str, str]] | None = None,
        repeat: float = 0.0,
        repeat_synthetic: float = 0.0,
    ) -> tuple[list[str], list[dict[str, str]]]:
        """``n`` unique events plus the requested shares of duplicates and bad lines, in a
        shuffled order: ``natural`` copies of an event, ``synthetic`` events reusing the id
        of another, events of ``repeat_from`` again (``repeat``) and new events reusing the
        id of one of them (``repeat_synthetic``: cross-batch synthetic duplicates). Returns
        the lines and the unique events (to repeat later)."""
        events = [self.event(fingerprint=self.rng.random() >= null_fingerprint) for _ in range(n)]
        lines = [line_of(e) for e in events]
        for _ in range(round(n * natural)):
            original = self.rng.choice(events)
            again = dict(original, etl_tstamp=original["etl_tstamp"][:-3] + "999")
            lines.append(line_of(again))
        for _ in range(round(n * synthetic)):
            original = self.rng.choice(events)
            lines.append(line_of(self.event(event_id=original["event_id"])))
        if repeat_from:
            for _ in range(round(n * repeat)):
                lines.append(line_of(self.rng.choice(repeat_from)))
            for _ in range(round(n * repeat_synthetic)):
                original = self.rng.choice(repeat_from)
                lines.append(line_of(self.event(event_id=original["event_id"])))
        for i in range(round(n * malformed)):
            bad = line_of(self.event())
            lines.append(bad + "\textra" if i % 2 else "\t".join(bad.split("\t")[:40]))
        self.rng.shuffle(lines)
        return lines, events
