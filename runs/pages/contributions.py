"""What an app adds to every page's layout (a navigation badge's count) and to the
overview (a panel's figures), registered once from its AppConfig.ready(): the shell
and the run pages then show them without importing the app that reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Read = Callable[[], Any]

_badges: dict[str, Read] = {}
_panels: dict[str, Read] = {}


def nav_badge(name: str, read: Read) -> None:
    """`read()` becomes the layout's variable `name` on every page a viewer sees."""
    _badges[name] = read


def overview_panel(name: str, read: Read) -> None:
    """`read()` becomes the overview's variable `name`."""
    _panels[name] = read


def badges() -> dict[str, Any]:
    return {name: read() for name, read in _badges.items()}


def panels() -> dict[str, Any]:
    return {name: read() for name, read in _panels.items()}
