"""How long ago, as the pages say it (bdre/templatetags/when.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bdre.templatetags.when import age, ago, until

NOW = datetime(2026, 11, 29, 13, 0, 30, tzinfo=UTC)


def test_under_a_minute_is_just_now_not_0_minutes():
    assert ago(NOW - timedelta(seconds=20), NOW) == (
        '<time datetime="2026-11-29T13:00:10+00:00" title="2026-11-29 13:00:10 UTC">just now</time>'
    )
    assert ">under a minute<" in age(NOW - timedelta(seconds=59), NOW)


def test_later_it_says_how_long_with_the_exact_time_in_utc_on_hover():
    said = ago(NOW - timedelta(minutes=3, seconds=5), NOW)
    assert said.endswith(">3\xa0minutes ago</time>")
    assert 'title="2026-11-29 12:57:25 UTC"' in said
    assert 'title="since 2026-11-29 11:00:30 UTC">2\xa0hours<' in age(NOW - timedelta(hours=2), NOW)


def test_nothing_is_said_of_no_time():
    assert ago(None) == "" and age(None) == ""


def test_a_next_run_of_a_timer_of_seconds_is_said_in_seconds():
    assert until(NOW + timedelta(seconds=12), NOW) == (
        '<time datetime="2026-11-29T13:00:42+00:00" title="2026-11-29 13:00:42 UTC">in 12 s</time>'
    )
    assert ">in 3\xa0hours<" in until(NOW + timedelta(hours=3), NOW)
    assert ">due now<" in until(NOW - timedelta(seconds=1), NOW)
    assert until(None) == ""
