"""Auto detection: every registered format votes on the first records of the source.

Detection reads record shapes (keys and value types), never text, so its error message can list
what it saw without leaking private content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import islice

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.formats import REGISTRY
from dpprefsyn.loaders.readers import WHOLE_FILE, Raw
from dpprefsyn.loaders.records import json_type

SAMPLE_SIZE = 20
"""Records that vote; enough to outvote a few malformed ones at the top of a file."""


def _shape(record: dict[str, object]) -> str:
    fields = ", ".join(f"{key!r}: {json_type(value)}" for key, value in sorted(record.items()))
    return "{" + fields + "}"


def detect_format(raws: Sequence[Raw], source: str) -> str:
    """Name the format most of the first decodable records look like.

    Raises
    ------
    DataError
        When no format matches, or two match equally often; the message lists the field names
        and value types of the first records and what each format expects.
    """
    decoded = (raw.value for raw in raws if raw.error is None)
    sample = list(islice((value for value in decoded if isinstance(value, dict)), SAMPLE_SIZE))
    votes = Counter(
        name for record in sample for name, spec in REGISTRY.items() if spec.looks_like(record)
    )
    ranked = votes.most_common(2)
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    seen = "; ".join(dict.fromkeys(_shape(record) for record in sample[:3])) or "no JSON objects"
    expected = "; ".join(f"{name}: {spec.shape}" for name, spec in REGISTRY.items())
    raise DataError(
        source,
        WHOLE_FILE,
        f"cannot tell the format from the first records (votes {dict(votes)}); they look like "
        f"{seen}. Known formats: {expected}. Pass format= explicitly",
    )
