"""``/metrics``: BDRE's numbers for Prometheus (docs/operations.md, "Metrics, JSON logs and
Flower").

Two kinds of numbers, gathered two ways:

- What the database knows (runs by state, queue depths and lags, dead letters, scan lags) is
  counted when Prometheus scrapes, by collectors that query it, so that every web process
  answers the same whatever it saw itself.
- What happens inside a worker (a step's duration, the events a shred read) is observed where
  it happens, with prometheus-client's multi-process mode: each process writes its values to
  files in ``PROMETHEUS_MULTIPROC_DIR``, and a scrape adds up the files of all of them.

The project knows no app's internals (the import-linter contracts): each app owns its numbers
in its own ``metrics`` module and registers its collector here from ``AppConfig.ready``
(:func:`register`); this module only serves them, behind the operator's token or address
allowlist (:func:`refusal`). The numbers name every team's jobs, so no team member reaches them
unless an operator lets him.

prometheus-client picks its mode from the environment when it is first imported, which the
settings prepare: this module is imported by the URLs and the apps' ``ready``, after the
settings; the worker's signals (bdre/celery.py) import it when they fire.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector as PrometheusCollector

from bdre.security import client_ip

log = logging.getLogger(__name__)

# name -> collector; a dict, so that an app's ready() run twice registers it once.
_COLLECTORS: dict[str, Collector] = {}
# prometheus-client's file names: <type>[_<gauge mode>]_<pid>.db
_PID_OF_FILE = re.compile(r"_(\d+)\.db\Z")


class Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


def register(name: str, collector: Collector) -> None:
    """Serve ``collector``'s metrics at every scrape (an app's ``AppConfig.ready``)."""
    _COLLECTORS[name] = collector


# --- who may scrape -------------------------------------------------------------------------


def refusal(request: HttpRequest) -> str | None:
    """Why ``request`` may not read the metrics, or None. A bearer token is checked when one
    is sent (a wrong one is refused from any address, so that a misconfigured Prometheus
    learns it at once); without one, the client's address must be in the allowlist."""
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() == "bearer":
        token = settings.BDRE_METRICS_TOKEN
        if not token:
            return "a bearer token was sent, but BDRE_METRICS_TOKEN is not set on this server"
        if hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return "the bearer token is not BDRE_METRICS_TOKEN"
    address = client_ip(request)
    if _allowed(address):
        return None
    how = "send 'Authorization: Bearer <BDRE_METRICS_TOKEN>' or scrape"
    return f"{how} from an address in BDRE_METRICS_ALLOW ({address} is not)"


def _allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])  # fe80::1%eth0: no zone
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # ::ffff:127.0.0.1
        ip = ip.ipv4_mapped
    return any(
        ip in ipaddress.ip_network(cidr, strict=False) for cidr in settings.BDRE_METRICS_ALLOW
    )


# --- the endpoint ---------------------------------------------------------------------------


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    refused = refusal(request)
    if refused:
        return HttpResponse(
            "403 Forbidden: /metrics is for the operators of this installation (it names "
            f"every team's jobs): {refused}. See docs/operations.md, 'Metrics, JSON logs and "
            "Flower'.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def exposition() -> bytes:
    """The text format of every metric: the processes' files and the apps' collectors."""
    registry = CollectorRegistry(auto_describe=False)
    folder = settings.PROMETHEUS_MULTIPROC_DIR
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        multiprocess.MultiProcessCollector(registry, path=folder)
    else:  # one process: its own numbers, in prometheus-client's default registry
        registry.register(REGISTRY)
    registry.register(_Apps(dict(_COLLECTORS)))
    return generate_latest(registry)


class _Apps(PrometheusCollector):
    """The apps' collectors. One that fails (the database is down) costs its own metrics,
    not the scrape: ``bdre_metrics_collector_up`` says which one failed."""

    def __init__(self, collectors: dict[str, Collector]):
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "bdre_metrics_collector_up",
            "1 when the collector answered at this scrape, 0 when it failed (see the web log)",
            labels=["collector"],
        )
        for name, collector in sorted(self.collectors.items()):
            try:
                metrics = list(collector.collect())
            except Exception:
                log.exception("metrics collector %s failed", name)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from metrics
        yield up


# --- the multi-process folder ---------------------------------------------------------------


def clear_dead_processes(folder: str | None = None) -> list[str]:
    """At a worker's start (prometheus-client asks for the folder to be wiped between runs,
    or the files of dead processes pile up and a reused pid inherits their values): remove
    the files of processes that are gone. Not the live ones' files: a web process and other
    workers on the host may share the folder. Returns the names removed."""
    folder = folder if folder is not None else settings.PROMETHEUS_MULTIPROC_DIR
    if not folder or not os.path.isdir(folder):
        return []
    removed = []
    for path in Path(folder).glob("*.db"):
        match = _PID_OF_FILE.search(path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            path.unlink()
        except FileNotFoundError:  # another worker starting at the same time
            continue
        removed.append(path.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process
        return True
    return True


def process_ended(pid: int) -> None:
    """A worker's pool process ended: prometheus-client's bookkeeping for its live gauges."""
    folder = settings.PROMETHEUS_MULTIPROC_DIR
    if folder:
        multiprocess.mark_process_dead(pid, folder)
