"""Accountants: epsilon of a mechanism or a composition, and noise calibration.

``prv`` wraps Microsoft's PRV accountant (Gopi, Lee and Wutschitz 2021) and ``pld`` Google's
pessimistic PLD accountant; a DP-SGD release reports the smaller of their upper bounds, and
noise is calibrated with the PLD. ``analysis`` holds the closed-form Gaussian math.
"""

from dpprefsyn.privacy.accountants.prv import (
    calibrate_subsampled_gaussian,
    prv_epsilon,
    subsampled_gaussian_epsilon,
)

__all__ = ["calibrate_subsampled_gaussian", "prv_epsilon", "subsampled_gaussian_epsilon"]
