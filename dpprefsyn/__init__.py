"""dpprefsyn: differentially private synthetic preference data.

The privacy boundary is a folder: :mod:`dpprefsyn.private` is the only package that reads
private records. It writes a :class:`~dpprefsyn.artifact.PreferenceModel`; every later stage
reads only that artifact and public data.
"""

__version__ = "0.1.0"
