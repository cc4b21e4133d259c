"""Incremental file ingestion: storage listings after a marker, and registration of new
files into batches (DESIGN.md section 5)."""
