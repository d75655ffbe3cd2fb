"""THE PRIVACY BOUNDARY: the only package that reads private preference records.

It turns a private table into a :class:`~dpprefsyn.artifact.PreferenceModel` through DP
releases recorded in a :class:`~dpprefsyn.privacy.PrivacyLedger`. No module outside this
package may import it except the CLI's ``fit`` command (a test enforces this).
"""

from dpprefsyn.private.config import FitConfig
from dpprefsyn.private.fit import fit_from_embeddings, fit_preference_model

__all__ = ["FitConfig", "fit_from_embeddings", "fit_preference_model"]
