"""The demo installation: a user, a team, an application and a small registered pipeline.

Idempotent: running it again keeps what exists and creates what is missing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from bdre.models import Membership, Role
from processes.models import BusDomain, Process
from processes.registry import StepSpec, create_job

DEMO_USERNAME = "demo"
DEMO_TEAM = "demo-team"
DEMO_APPLICATION = "clickstream"


@dataclass
class DemoSetup:
    username: str
    password: str | None  # None when the user existed already (password unchanged)
    team: Group
    application: BusDomain
    jobs: list[Process]


@transaction.atomic
def set_up_demo() -> DemoSetup:
    User = get_user_model()
    password: str | None = None
    user = User.objects.filter(username=DEMO_USERNAME).first()
    if user is None:
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(DEMO_USERNAME, "demo@example.com", password)
    team, _ = Group.objects.get_or_create(name=DEMO_TEAM)
    Membership.objects.get_or_create(user=user, team=team, defaults={"role": Role.ADMIN})
    application, _ = BusDomain.objects.get_or_create(
        name=DEMO_APPLICATION,
        defaults={
            "team": team,
            "owner": DEMO_USERNAME,
            "description": "Snowplow enriched events from the web site, shredded and "
            "deduplicated, summarised per day.",
        },
    )
    landing = (settings.VAR_DIR / "landing").resolve()
    jobs = [
        _job(
            application,
            name="clickstream_ingest",
            process_type_id=1,
            description="Registers new enriched-event files from the landing folder.",
            steps=[
                StepSpec(
                    name="clickstream_ingest_scan",
                    process_type_id=11,
                    description="Marker listing of the landing folder.",
                    properties={
                        "scan": {
                            "location": landing.as_uri(),
                            "min_age_seconds": "5",
                            "max_files": "1000",
                            "reconcile_every": "10",
                        }
                    },
                )
            ],
        ),
    ]
    jobs.append(
        _job(
            application,
            name="clickstream_shred",
            process_type_id=2,
            description="Shreds enriched events into atomic events and contexts, deduplicated.",
            steps=[
                StepSpec(
                    name="clickstream_shred_events",
                    process_type_id=23,
                    upstream=[jobs[0].pk],
                    description="Enriched TSV to atomic events with four dedup strategies.",
                    properties={
                        "shred": {"atomic_table": "atomic_events"},
                        "dedup": {
                            "in_batch_natural": "true",
                            "cross_batch_natural": "true",
                            "in_batch_synthetic": "true",
                            "cross_batch_synthetic": "true",
                            "manifest": "database",
                            "ttl_days": "180",
                        },
                    },
                )
            ],
        )
    )
    jobs.append(
        _job(
            application,
            name="clickstream_daily",
            process_type_id=3,
            description="Daily page-view summary, cut at the end-of-day batch.",
            steps=[
                StepSpec(
                    name="clickstream_daily_summary",
                    process_type_id=31,
                    upstream=[jobs[1].pk],
                    batch_cut_pattern="EOD",
                    properties={
                        "sql": {
                            "output_table": "daily_page_views",
                            "query": "SELECT to_date(collector_tstamp) AS day, "
                            "count(*) AS page_views FROM atomic_events "
                            "WHERE event = 'page_view' GROUP BY to_date(collector_tstamp)",
                        }
                    },
                )
            ],
        )
    )
    return DemoSetup(DEMO_USERNAME, password, team, application, jobs)


def _job(application: BusDomain, **kwargs: object) -> Process:
    existing = Process.objects.filter(name=kwargs["name"], deleted=False).first()
    if existing is not None:
        return existing
    return create_job(bus_domain=application, **kwargs)  # type: ignore[arg-type]
