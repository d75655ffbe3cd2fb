"""DP estimators, scikit-learn style: each one checks the ledger, releases, then spends."""

from dpprefsyn.dp.cluster import DiffprivlibKMeans, DPSphericalKMeans
from dpprefsyn.dp.histogram import DPHistogram
from dpprefsyn.dp.pca import DPPCA
from dpprefsyn.dp.reward import DPMeanReward, DPNewtonReward, DPSGDReward

__all__ = [
    "DPHistogram",
    "DPMeanReward",
    "DPNewtonReward",
    "DPPCA",
    "DPSGDReward",
    "DPSphericalKMeans",
    "DiffprivlibKMeans",
]
