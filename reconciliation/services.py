"""The operator side of reconciliation. The rule that applies an outcome to a claim,
its step and its run is the engine's (runs/engine/resolve.py); this module is where
operators' use of it lives, and re-exports it under the names the pages and the API
use."""

from __future__ import annotations

from runs.engine.resolve import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    InvalidResolution,
    Resolution,
    ResolutionError,
    resolve_claim,
)

__all__ = [
    "ClaimAlreadyResolved",
    "ClaimNotFound",
    "ClaimNotUnresolved",
    "InvalidResolution",
    "Resolution",
    "ResolutionError",
    "resolve_claim",
]
