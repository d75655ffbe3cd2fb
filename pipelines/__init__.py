"""Batch pipelines: the runner (``python -m pipelines.run``), its configs and the demo data."""
