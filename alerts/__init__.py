"""Alerts: a job's failures, dead letters, runs past their SLA and missing new data, told by
e-mail and webhook, at most one per job and kind in a window (docs/operations.md,
"Alerts")."""
