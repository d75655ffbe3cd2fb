"""Privacy bookkeeping: releases, the ledger, accountants and noise sources.

Math lives in :mod:`~dpprefsyn.privacy.analysis` and :mod:`~dpprefsyn.privacy.accountants`;
the ledger only records and composes.
"""

from dpprefsyn.privacy.ledger import NEIGHBOURING_RELATION, PrivacyLedger
from dpprefsyn.privacy.releases import Release
from dpprefsyn.privacy.rng import make_rng

__all__ = ["NEIGHBOURING_RELATION", "PrivacyLedger", "Release", "make_rng"]
