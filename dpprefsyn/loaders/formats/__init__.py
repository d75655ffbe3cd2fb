"""Registry of input formats: name -> :class:`~dpprefsyn.loaders.formats.base.Format`.

Parsing and auto detection both read this one dict, so adding a format is one module and one
entry here.
"""

from __future__ import annotations

from dpprefsyn.loaders.formats import conversational, hh_rlhf, hhh, oasst, pairwise, preference
from dpprefsyn.loaders.formats.base import Format

REGISTRY: dict[str, Format] = {
    "preference": preference.FORMAT,
    "conversational": conversational.FORMAT,
    "hh-rlhf": hh_rlhf.FORMAT,
    "oasst": oasst.FORMAT,
    "pairwise": pairwise.FORMAT,
    "hhh": hhh.FORMAT,
}

__all__ = ["REGISTRY", "Format"]
