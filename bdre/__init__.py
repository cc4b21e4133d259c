"""BDRE: metadata registry and orchestration engine for incremental batch pipelines."""

from .celery import app as celery_app

__all__ = ["celery_app"]
