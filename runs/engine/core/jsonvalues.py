"""Results and evidence are stored as JSON: what cannot round-trip is refused here."""

from __future__ import annotations

import json
from typing import Any


def ensure_json(value: Any, what: str = "step result") -> Any:
    """Results and evidence are stored as JSON: refuse what cannot round-trip, with a
    clear error."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serializable: {exc}") from exc
