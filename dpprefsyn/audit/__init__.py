"""Empirical privacy audits: evidence that an implementation does not leak beyond its claim.

An audit yields a statistical lower bound on a mechanism's true epsilon (or a membership
advantage): a value above the claimed epsilon proves a bug, a value below it is consistent with
the claim. The tests in ``tests/audit/`` run the audits against the DP stages.
"""

from dpprefsyn.audit.distinguish import (
    DistinguishResult,
    EventBound,
    clopper_pearson,
    distinguish,
)
from dpprefsyn.audit.linear import linear_scores
from dpprefsyn.audit.membership import (
    MembershipResult,
    dataset_similarity_scores,
    dp_advantage_bound,
    membership_auc,
    model_margin_scores,
)
from dpprefsyn.audit.one_run import (
    AuditResult,
    audit,
    epsilon_lower_bound,
    insert_canaries,
    p_value,
)

__all__ = [
    "AuditResult",
    "DistinguishResult",
    "EventBound",
    "MembershipResult",
    "audit",
    "clopper_pearson",
    "dataset_similarity_scores",
    "distinguish",
    "dp_advantage_bound",
    "epsilon_lower_bound",
    "insert_canaries",
    "linear_scores",
    "membership_auc",
    "model_margin_scores",
    "p_value",
]
