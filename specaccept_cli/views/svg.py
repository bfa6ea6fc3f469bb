"""Plots as inline SVG text: linear axes with ticks, and the few marks the report draws.

Hand-written rather than drawn by a plotting library: the report needs bars, points with error
bars, lines, bands and a heatmap, each with a hover `<title>`; here that is a few hundred lines
with no dependency, the output is a pure function of the numbers (byte-identical for the same
input), and every string from data is escaped in one place (`text`). Colours and line styles
come from classes that the page's stylesheet defines.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from msgspec import Struct, field

from specaccept_cli.text import visible

Point = tuple[float, float]


def text(value: object) -> str:
    """Data as HTML/SVG text or attribute: control characters made visible, then escaped (quotes too)."""
    return html.escape(visible(str(value)), quote=True)


def _px(value: float) -> str:
    return f"{value:.1f}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    span = high - low
    power = 10.0 ** math.floor(math.log10(span / max(1, count)))
    step = min((m * power for m in (1.0, 2.0, 5.0, 10.0)), key=lambda size: abs(span / size - count))
    first = math.ceil(low / step - 1e-9)
    ticks = []
    value = first * step
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_label(value: float) -> str:
    """A tick value as short text: whole numbers with thousands separators, else up to 3 significant digits."""
    if abs(value - round(value)) < 1e-9 and abs(value) < 1e15:
        return f"{round(value):,}"
    return f"{value:.3g}"


class Axis(Struct):
    """A chart axis: its range, its label and its ticks (position, text)."""

    low: float
    high: float
    label: str
    ticks: list[tuple[float, str]] = field(default_factory=list)

    @classmethod
    def linear(cls, low: float, high: float, label: str, count: int = 5) -> Axis:
        if high <= low:
            high = low + 1.0
        return cls(low, high, label, [(value, tick_label(value)) for value in nice_ticks(low, high, count)])

    @classmethod
    def categories(cls, names: Sequence[str], label: str) -> Axis:
        """Categories at 0, 1, 2, ... (labels are data: escaped when drawn)."""
        return cls(-0.5, len(names) - 0.5, label, [(float(index), name) for index, name in enumerate(names)])


class Chart(Struct):
    """One SVG plot: axes, gridlines, tick labels and marks, each mark with a hover title."""

    x: Axis
    y: Axis
    title: str
    width: int = 560
    height: int = 300
    left: int = 64
    right: int = 16
    top: int = 28
    bottom: int = 48
    marks: list[str] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)

    def px(self, x: float, y: float) -> Point:
        inner_width = self.width - self.left - self.right
        inner_height = self.height - self.top - self.bottom
        px = self.left + (x - self.x.low) / (self.x.high - self.x.low) * inner_width
        py = self.top + (1.0 - (y - self.y.low) / (self.y.high - self.y.low)) * inner_height
        return px, py

    def _add(self, element: str, hover: str | None) -> None:
        if hover is None:
            self.marks.append(element + "/>")
        else:
            self.marks.append(f"{element}><title>{text(hover)}</title></{element.split()[0][1:]}>")

    def rect(self, x0: float, x1: float, y0: float, y1: float, css: str, hover: str | None = None) -> None:
        (a, b), (c, d) = self.px(x0, y0), self.px(x1, y1)
        left, top = min(a, c), min(b, d)
        self._add(
            f'<rect class="{css}" x="{_px(left)}" y="{_px(top)}" width="{_px(abs(c - a))}" height="{_px(abs(d - b))}"',
            hover,
        )

    def line(self, points: Sequence[Point], css: str, hover: str | None = None) -> None:
        if len(points) < 2:
            return
        path = " ".join(f"{_px(px)},{_px(py)}" for px, py in (self.px(x, y) for x, y in points))
        self._add(f'<polyline class="{css}" points="{path}"', hover)

    def band(self, upper: Sequence[Point], lower: Sequence[Point], css: str, hover: str | None = None) -> None:
        """The area between two lines drawn over the same x values."""
        if len(upper) < 2:
            return
        outline = [*upper, *reversed(lower)]
        path = " ".join(f"{_px(px)},{_px(py)}" for px, py in (self.px(x, y) for x, y in outline))
        self._add(f'<polygon class="{css}" points="{path}"', hover)

    def point(self, x: float, y: float, css: str, hover: str | None = None, radius: float = 3.5) -> None:
        px, py = self.px(x, y)
        self._add(f'<circle class="{css}" cx="{_px(px)}" cy="{_px(py)}" r="{radius:g}"', hover)

    def error_bar(self, x: float, low: float, high: float, css: str, hover: str | None = None) -> None:
        self.line([(x, low), (x, high)], css, hover)

    def horizontal(self, y: float, css: str, hover: str | None = None) -> None:
        self.line([(self.x.low, y), (self.x.high, y)], css, hover)

    def vertical(self, x: float, css: str, hover: str | None = None) -> None:
        self.line([(x, self.y.low), (x, self.y.high)], css, hover)

    def svg(self) -> str:
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" aria-label="{text(self.title)}">',
            f"<title>{text(self.title)}</title>",
            f'<text class="chart-title" x="{self.left}" y="16">{text(self.title)}</text>',
        ]
        bottom, right = self.height - self.bottom, self.width - self.right
        for value, label in self.x.ticks:
            px, _ = self.px(value, self.y.low)
            parts.append(f'<line class="grid" x1="{_px(px)}" y1="{self.top}" x2="{_px(px)}" y2="{bottom}"/>')
            parts.append(
                f'<text class="tick" x="{_px(px)}" y="{bottom + 14}" text-anchor="middle">{text(label)}</text>'
            )
        for value, label in self.y.ticks:
            _, py = self.px(self.x.low, value)
            parts.append(f'<line class="grid" x1="{self.left}" y1="{_px(py)}" x2="{right}" y2="{_px(py)}"/>')
            shown = _short(label, (self.left - 12) // 7)
            parts.append(
                f'<text class="tick" x="{self.left - 6}" y="{_px(py + 4)}" text-anchor="end">{text(shown)}'
                f"<title>{text(label)}</title></text>"
            )
        inner_width, inner_height = right - self.left, bottom - self.top
        parts.append(
            f'<rect class="frame" x="{self.left}" y="{self.top}" width="{inner_width}" height="{inner_height}"/>'
        )
        parts += self.marks
        middle, centre = (self.left + right) / 2, (self.top + bottom) / 2
        parts.append(
            f'<text class="axis" x="{_px(middle)}" y="{self.height - 8}" text-anchor="middle">'
            f"{text(self.x.label)}</text>"
        )
        parts.append(
            f'<text class="axis" x="14" y="{_px(centre)}" text-anchor="middle" '
            f'transform="rotate(-90 14 {_px(centre)})">{text(self.y.label)}</text>'
        )
        x = self.width - self.right
        for css, label in reversed(self.legend):
            x -= 14 + 7 * len(label)
            parts.append(f'<rect class="{css} key" x="{x}" y="8" width="10" height="10"/>')
            parts.append(f'<text class="tick" x="{x + 14}" y="17">{text(label)}</text>')
        parts.append("</svg>")
        return "".join(parts)


def _short(label: str, limit: int) -> str:
    """Long category names (group keys) are cut on the axis; the full name is in the hover title."""
    return label if len(label) <= limit else label[: limit - 1] + "…"
