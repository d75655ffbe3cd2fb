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


class DatasetTooSmallError(ValueError):
    """The private dataset is too small for the budget: the noise would swamp what it says.

    Decided from DP releases only (a noisy count), never from the exact number of records.
    The releases that decided it are spent; ``spent_epsilon`` and ``spent_delta`` say how much,
    so a lifetime budget can record them.

    Parameters
    ----------
    message : str
        The reason and what to change, naming the noisy count ``n~`` and epsilon.
    noisy_count : float
        The released count the decision used.
    required : float
        The fewest records the planned releases need.
    epsilon : float
        The budget that was asked for.
    spent_epsilon, spent_delta : float
        What the releases made before the refusal cost.
    """

    def __init__(
        self,
        message: str,
        *,
        noisy_count: float,
        required: float,
        epsilon: float,
        spent_epsilon: float,
        spent_delta: float,
    ) -> None:
        super().__init__(message)
        self.noisy_count = noisy_count
        self.required = required
        self.epsilon = epsilon
        self.spent_epsilon = spent_epsilon
        self.spent_delta = spent_delta


class PrivacyLeakWarning(RuntimeWarning):
    """A DP parameter was derived from the data instead of being set from public knowledge."""
