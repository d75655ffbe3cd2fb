"""Loaders: private preference data, in any supported format, into one validated polars table.

>>> from dpprefsyn.loaders import load_preferences  # doctest: +SKIP
>>> load_preferences("pairs.jsonl").table.columns  # doctest: +SKIP
['record_id', 'prompt', 'chosen', 'rejected']
"""

from __future__ import annotations

from dpprefsyn.loaders.load import FORMATS, load_preferences
from dpprefsyn.loaders.table import PreferenceData

__all__ = ["FORMATS", "PreferenceData", "load_preferences"]
