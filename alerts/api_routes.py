"""Alerts as REST resources (bdre.routes)."""

from __future__ import annotations

from alerts.api import AlertViewSet, DestinationViewSet
from bdre.routes import router

router.register("alerts", AlertViewSet, basename="alert")
router.register("alert-destinations", DestinationViewSet, basename="alert-destination")
