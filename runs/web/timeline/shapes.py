"""SVG path data for the marks: circles, crosses, diamonds, flags and the like."""

from __future__ import annotations

from .model import Shape


def num(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def circle(cx: float, cy: float, r: float) -> str:
    return (
        f"M{num(cx - r)} {num(cy)}a{num(r)} {num(r)} 0 1 0 {num(2 * r)} 0"
        f"a{num(r)} {num(r)} 0 1 0 {num(-2 * r)} 0Z"
    )


def cross(cx: float, cy: float, r: float) -> str:
    return (
        f"M{num(cx - r)} {num(cy - r)}L{num(cx + r)} {num(cy + r)}"
        f"M{num(cx + r)} {num(cy - r)}L{num(cx - r)} {num(cy + r)}"
    )


def diamond(cx: float, cy: float, r: float) -> str:
    return (
        f"M{num(cx)} {num(cy - r)}L{num(cx + r)} {num(cy)}"
        f"L{num(cx)} {num(cy + r)}L{num(cx - r)} {num(cy)}Z"
    )


def question(x: float, cy: float) -> str:
    """A small question mark (a probe that could not tell)."""
    return (
        f"M{num(x - 1.8)} {num(cy - 1.6)}a1.9 1.9 0 1 1 2.6 1.8c-.7 .3 -.8 .7 -.8 1.3"
        f"M{num(x)} {num(cy + 2.4)}v.6"
    )


def vline(x: float, y0: float, y1: float) -> str:
    return f"M{num(x)} {num(y0)}V{num(y1)}"


def flag(x: float, top: float, bottom: float) -> list[Shape]:
    return [
        Shape("mk-pole", vline(x, top, bottom)),
        Shape("mk-fill", f"M{num(x)} {num(top)}h9l-3 3.5l3 3.5h-9Z"),
    ]


def triangle(cx: float, cy: float, r: float) -> str:
    return (
        f"M{num(cx)} {num(cy - r)}L{num(cx + r)} {num(cy + r * 0.8)}"
        f"L{num(cx - r)} {num(cy + r * 0.8)}Z"
    )


def play(cx: float, cy: float, r: float) -> str:
    return (
        f"M{num(cx - r * 0.7)} {num(cy - r)}L{num(cx + r)} {num(cy)}"
        f"L{num(cx - r * 0.7)} {num(cy + r)}Z"
    )


def square(cx: float, cy: float, r: float) -> str:
    return f"M{num(cx - r)} {num(cy - r)}h{num(2 * r)}v{num(2 * r)}h{num(-2 * r)}Z"
