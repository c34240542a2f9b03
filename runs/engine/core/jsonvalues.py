"""Results and evidence are stored as JSON: what cannot round-trip is refused here."""

from __future__ import annotations

import json
from typing import Any

# Exact types whose JSON round trip returns an equal value of the same type (a float's
# does not: NaN and the infinities do not round-trip; a subclass's type is lost).
_SCALARS = (str, int, bool)


def ensure_json(value: Any, what: str = "step result") -> Any:
    """Results and evidence are stored as JSON: refuse what cannot round-trip, with a
    clear error."""
    if value is None or type(value) in _SCALARS:
        return value  # the round trip is the identity: the common "no result" costs nothing
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serializable: {exc}") from exc
