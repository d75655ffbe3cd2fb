"""Exceptions and warnings shared across the package.

Messages name the record and the field, never the private content itself.
"""

from __future__ import annotations


class DataError(ValueError):
    """A record of an input file is unusable.

    Parameters
    ----------
    record : str
        Stable id of the record (file name and line/row index), never its content.
    field : str
        The field that is missing or malformed.
    reason : str
        What is wrong, in words a user can act on.
    """

    def __init__(self, record: str, field: str, reason: str) -> None:
        self.record = record
        self.field = field
        self.reason = reason
        super().__init__(f"record {record}, field '{field}': {reason}")


class BudgetError(ValueError):
    """A release would exceed the privacy budget; nothing was spent."""


class PrivacyLeakWarning(RuntimeWarning):
    """A DP parameter was derived from the data instead of being set from public knowledge."""
