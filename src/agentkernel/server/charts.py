"""The `chart` visual block (S6.2: bar, line, pie) drawn on the server as a safe SVG string.

Why server-side SVG rather than a JavaScript chart library in the page:

- **Nothing to vendor or fetch**: the page needs no chart library (only
  marked and DOMPurify, static/vendor/), and no network at run time.
- **One place to distrust the data**: a chart's labels, names and numbers
  come from a script, which is untrusted code. Here every text goes in as
  an XML text node or attribute written by ElementTree (so `</svg><script>`
  stays text), characters XML cannot carry are dropped, numbers are checked
  (NaN, infinities and non-numbers are skipped with a note), and the size is
  bounded (at most `MAX_SERIES` series and `MAX_MARKS` marks; a pie keeps
  its largest slices and sums the rest into "other"), whatever the block
  holds. The page shows the string as an image it can trust.
- **Accessible without script**: the SVG has `role="img"` and an
  `aria-label`, a `<title>` and a `<desc>` summing it up, visible text
  labels (axis values, category labels, a legend), and every mark (bar,
  point, slice) has its own `<title>` with its label, series and value, which
  screen readers and hovering both show.
- **Testable in Python**: the output parses with xml.etree, so tests count
  marks and read labels without a browser.

The page may still restyle it by class (`mark`, `note`, `legend`, `axis`).
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from agentkernel.types import JSONValue, VisualBlock

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 48, 56
MAX_SERIES = 8
MAX_MARKS = 800  # bars or points over all series; a chart with more shows the first ones
MAX_SLICES = 12  # a pie's largest slices; the rest become one "other" slice
MAX_LABEL_CHARS = 40  # shown on the chart; a mark's <title> keeps up to MAX_TITLE_CHARS
MAX_TITLE_CHARS = 200
NOTE_LINE_HEIGHT = 14
MAX_NOTES = 3
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_YOf: TypeAlias = Callable[[float], float]  # a value's y on the plot
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class _Series:
    name: str
    values: list[float | None]  # None: no value to draw (null, or skipped with a note)


@dataclass
class _Chart:
    kind: str
    title: str
    labels: list[str]
    series: list[_Series]
    notes: list[str] = field(default_factory=list)


def render_chart(block: VisualBlock) -> str:
    """The SVG text of one `chart` block; ValueError when the block is not a chart at all.

    A well-formed block (tools/visual.py's schema) always renders: what
    cannot be drawn is left out and a note under the chart says what and why.
    """
    chart = _read_chart(block)
    svg = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {WIDTH} {HEIGHT}",
            "width": str(WIDTH),
            "height": str(HEIGHT),
            "role": "img",
            "aria-label": chart.title,
            "class": f"chart chart-{chart.kind}",
            "font-family": "sans-serif",
            "font-size": "11",
        },
    )
    ET.SubElement(svg, "title").text = chart.title
    desc = ET.SubElement(svg, "desc")
    ET.SubElement(
        svg, "text", {"x": str(WIDTH / 2), "y": "18", "text-anchor": "middle", "font-size": "14"}
    ).text = _clip(chart.title, 80)
    if chart.kind == "pie":
        _draw_pie(svg, chart)
    else:
        _draw_axes_chart(svg, chart)
    desc.text = _summary(chart)
    _draw_notes(svg, chart.notes)
    return ET.tostring(svg, encoding="unicode")


# -- reading the block ---------------------------------------------------------------------------


def _read_chart(block: VisualBlock) -> _Chart:
    kind = block.get("chart")
    labels, series = block.get("labels"), block.get("series")
    if kind not in ("bar", "line", "pie") or not isinstance(labels, list) or not isinstance(series, list):
        raise ValueError("not a chart block: needs `chart` (bar, line or pie), `labels` and `series` lists")
    title = block.get("title")
    chart = _Chart(
        kind=str(kind),
        title=_clip(_text(title), MAX_TITLE_CHARS) if isinstance(title, str) and title else f"{kind} chart",
        labels=[_clip(_text(label), MAX_TITLE_CHARS) for label in labels[: _label_cap(len(series))]],
        series=[],
    )
    if len(labels) > len(chart.labels):
        chart.notes.append(f"showing the first {len(chart.labels):,} of {len(labels):,} labels")
    kept = series[:1] if kind == "pie" else series[:MAX_SERIES]
    if len(series) > len(kept):
        chart.notes.append(f"showing {len(kept)} of {len(series)} series")
    skipped = 0
    for index, entry in enumerate(kept):
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), list):
            raise ValueError(f"not a chart block: series[{index}] needs a `data` list")
        name = entry.get("name")
        data = entry["data"]
        assert isinstance(data, list)
        values = [_number(data[i]) if i < len(data) else None for i in range(len(chart.labels))]
        skipped += sum(1 for i, v in enumerate(values) if v is None and i < len(data) and data[i] is not None)
        shown = (
            _clip(_text(name), MAX_TITLE_CHARS) if isinstance(name, str) and name else f"series {index + 1}"
        )
        chart.series.append(_Series(shown, values))
    if skipped:
        chart.notes.append(f"{skipped} value(s) skipped: not finite numbers (NaN, infinity or not a number)")
    return chart


def _label_cap(series_count: int) -> int:
    return max(1, MAX_MARKS // max(1, min(series_count, MAX_SERIES)))


def _number(value: JSONValue) -> float | None:
    """A drawable number; None for null, booleans, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int past the float range
        return None
    return number if math.isfinite(number) else None


def _text(value: JSONValue) -> str:
    """Any label as text XML can carry (strings as they are, other values as JSON)."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    return _NOT_XML.sub("", value)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: float) -> str:
    return f"{value:,.6g}" if not value.is_integer() or abs(value) >= 1e15 else f"{int(value):,}"


# -- bar and line --------------------------------------------------------------------------------


def _draw_axes_chart(svg: ET.Element, chart: _Chart) -> None:
    values = [v for s in chart.series for v in s.values if v is not None]
    if not values:
        chart.notes.append("no data to draw")
        return
    low, high, ticks = _ticks(min(0.0, *values), max(0.0, *values))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def y_of(value: float) -> float:
        # halves first: high - low may overflow for finite values near the float limit
        return TOP + plot_h * (1 - (value / 2 - low / 2) / (high / 2 - low / 2))

    _draw_y_axis(svg, ticks, y_of)
    _draw_x_labels(svg, chart.labels, plot_w)
    _draw_legend(svg, chart.series)
    marks = ET.SubElement(svg, "g", {"class": "marks"})
    slot = plot_w / max(1, len(chart.labels))
    for index, series in enumerate(chart.series):
        color = PALETTE[index % len(PALETTE)]
        if chart.kind == "bar":
            _draw_bars(marks, chart.labels, series, index, len(chart.series), slot, y_of, color)
        else:
            _draw_line(marks, chart.labels, series, slot, y_of, color)


def _ticks(low: float, high: float) -> tuple[float, float, list[float]]:
    """The axis range widened to round steps (1, 2, 2.5 or 5 × 10ⁿ), and its ticks.

    Near the float limit, where round steps would overflow, the range is
    kept and cut in four.
    """
    if low == high:
        high = low + 1.0
    span = high - low
    if math.isfinite(span):
        raw = span / 4
        magnitude = 10.0 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
        first, last = math.floor(low / step) * step, math.ceil(high / step) * step
        if math.isfinite(first) and math.isfinite(last):
            return first, last, [first + i * step for i in range(round((last - first) / step) + 1)]
    return low, high, [low + i * (high / 4 - low / 4) for i in range(5)]


def _draw_y_axis(svg: ET.Element, ticks: Sequence[float], y_of: _YOf) -> None:
    axis = ET.SubElement(svg, "g", {"class": "axis"})
    for value in ticks:
        y = f"{y_of(value):.1f}"
        ET.SubElement(
            axis, "line", {"x1": str(LEFT), "x2": str(WIDTH - RIGHT), "y1": y, "y2": y, "stroke": "#ddd"}
        )
        ET.SubElement(axis, "text", {"x": str(LEFT - 4), "y": y, "text-anchor": "end"}).text = _clip(
            _fmt(value), 12
        )
    zero = f"{y_of(0.0):.1f}"
    ET.SubElement(
        axis, "line", {"x1": str(LEFT), "x2": str(WIDTH - RIGHT), "y1": zero, "y2": zero, "stroke": "#666"}
    )


def _draw_x_labels(svg: ET.Element, labels: Sequence[str], plot_w: float) -> None:
    """Category labels under the plot; every k-th when they do not fit (each mark's title has its own)."""
    axis = ET.SubElement(svg, "g", {"class": "axis"})
    slot = plot_w / max(1, len(labels))
    every = max(1, math.ceil(len(labels) / max(1, int(plot_w // 48))))
    for i in range(0, len(labels), every):
        x = f"{LEFT + slot * (i + 0.5):.1f}"
        attrs = {"x": x, "y": str(HEIGHT - BOTTOM + 14), "text-anchor": "middle"}
        ET.SubElement(axis, "text", attrs).text = _clip(labels[i], min(MAX_LABEL_CHARS, 8 * every))


def _draw_legend(svg: ET.Element, series: Sequence[_Series]) -> None:
    legend = ET.SubElement(svg, "g", {"class": "legend"})
    step = (WIDTH - LEFT - RIGHT) / max(1, len(series))
    for index, entry in enumerate(series):
        x = LEFT + step * index
        color = PALETTE[index % len(PALETTE)]
        attrs = {"x": f"{x:.1f}", "y": "28", "width": "10", "height": "10", "fill": color}
        ET.SubElement(legend, "rect", attrs)
        ET.SubElement(legend, "text", {"x": f"{x + 14:.1f}", "y": "37"}).text = _clip(
            entry.name, int(step // 7)
        )


def _draw_bars(
    marks: ET.Element,
    labels: Sequence[str],
    series: _Series,
    index: int,
    count: int,
    slot: float,
    y_of: _YOf,
    color: str,
) -> None:
    width = slot * 0.8 / count
    for i, value in enumerate(series.values):
        if value is None:
            continue
        top, bottom = sorted((y_of(value), y_of(0.0)))
        x = LEFT + slot * i + slot * 0.1 + width * index
        attrs = {"x": f"{x:.2f}", "y": f"{top:.2f}", "width": f"{width:.2f}", "height": f"{bottom - top:.2f}"}
        _mark(marks, "rect", {**attrs, "fill": color}, labels[i], series.name, value)


def _draw_line(
    marks: ET.Element, labels: Sequence[str], series: _Series, slot: float, y_of: _YOf, color: str
) -> None:
    """One polyline per unbroken run of values (a null is a gap), and a point per value."""
    runs: list[list[str]] = [[]]
    radius = "3" if len(series.values) <= 60 else "1.5"  # many points: the line shows the shape
    for i, value in enumerate(series.values):
        if value is None:
            runs.append([])
            continue
        x, y = LEFT + slot * (i + 0.5), y_of(value)
        runs[-1].append(f"{x:.2f},{y:.2f}")
        attrs = {"cx": f"{x:.2f}", "cy": f"{y:.2f}", "r": radius, "fill": color}
        _mark(marks, "circle", attrs, labels[i], series.name, value)
    for run in runs:
        if len(run) > 1:
            attrs = {
                "points": " ".join(run),
                "fill": "none",
                "stroke": color,
                "stroke-width": "2",
                "class": "line",
            }
            marks.insert(0, ET.Element("polyline", attrs))


# -- pie -----------------------------------------------------------------------------------------


def _draw_pie(svg: ET.Element, chart: _Chart) -> None:
    """The first series as slices; negatives and zeros are left out (with a note), the smallest merged."""
    series = chart.series[0] if chart.series else _Series("", [])
    slices = [(chart.labels[i], v) for i, v in enumerate(series.values) if v is not None and v > 0]
    left_out = sum(1 for v in series.values if v is not None and v <= 0)
    if left_out:
        chart.notes.append(f"{left_out} value(s) not drawn: a pie shows only positive values")
    if not slices:
        chart.notes.append("no data to draw")
        return
    slices.sort(key=lambda s: -s[1])
    if len(slices) > MAX_SLICES:
        rest = slices[MAX_SLICES - 1 :]
        chart.notes.append(f"the {len(rest)} smallest slices are shown together as “other”")
        slices = [*slices[: MAX_SLICES - 1], ("other", math.fsum(v for _, v in rest))]
    largest = slices[0][1]  # shares computed on values scaled by the largest: no overflow
    total = math.fsum(v / largest for _, v in slices)
    cx, cy, radius = WIDTH / 2 - 80, TOP + (HEIGHT - TOP - BOTTOM) / 2, (HEIGHT - TOP - BOTTOM) / 2
    marks = ET.SubElement(svg, "g", {"class": "marks"})
    legend = ET.SubElement(svg, "g", {"class": "legend"})
    angle = -math.pi / 2
    for index, (label, value) in enumerate(slices):
        share = (value / largest) / total
        color = PALETTE[index % len(PALETTE)]
        if len(slices) == 1:
            attrs = {"cx": f"{cx:.2f}", "cy": f"{cy:.2f}", "r": f"{radius:.2f}", "fill": color}
            _mark(marks, "circle", attrs, label, series.name, value, share)
        else:
            end = angle + share * 2 * math.pi
            _mark(
                marks,
                "path",
                {"d": _arc(cx, cy, radius, angle, end), "fill": color},
                label,
                series.name,
                value,
                share,
            )
            angle = end
        y = TOP + index * 18
        ET.SubElement(
            legend,
            "rect",
            {"x": f"{cx + radius + 24:.1f}", "y": str(y), "width": "10", "height": "10", "fill": color},
        )
        text = f"{_clip(label, MAX_LABEL_CHARS)} ({share:.1%})"
        ET.SubElement(legend, "text", {"x": f"{cx + radius + 38:.1f}", "y": str(y + 9)}).text = text


def _arc(cx: float, cy: float, r: float, start: float, end: float) -> str:
    x1, y1 = cx + r * math.cos(start), cy + r * math.sin(start)
    x2, y2 = cx + r * math.cos(end), cy + r * math.sin(end)
    large = 1 if end - start > math.pi else 0
    return f"M{cx:.2f},{cy:.2f} L{x1:.2f},{y1:.2f} A{r:.2f},{r:.2f} 0 {large} 1 {x2:.2f},{y2:.2f} Z"


# -- shared pieces -------------------------------------------------------------------------------


def _mark(
    parent: ET.Element,
    tag: str,
    attrs: dict[str, str],
    label: str,
    series: str,
    value: float,
    share: float | None = None,
) -> None:
    """One bar, point or slice, with its own <title>: label, series and value (and share for a slice)."""
    mark = ET.SubElement(parent, tag, {**attrs, "class": "mark"})
    part = f" ({share:.1%})" if share is not None else ""
    ET.SubElement(mark, "title").text = f"{label} · {series}: {_fmt(value)}{part}"


def _draw_notes(svg: ET.Element, notes: Sequence[str]) -> None:
    shown = list(notes[:MAX_NOTES])
    for index, note in enumerate(shown):
        y = HEIGHT - 4 - NOTE_LINE_HEIGHT * (len(shown) - 1 - index)
        ET.SubElement(svg, "text", {"x": str(LEFT), "y": str(y), "class": "note", "fill": "#666"}).text = note


def _summary(chart: _Chart) -> str:
    names = ", ".join(s.name for s in chart.series)
    text = f"{chart.kind} chart, {len(chart.labels)} label(s), series: {names or 'none'}"
    return text + "".join(f". {note}" for note in chart.notes)


__all__ = ["MAX_MARKS", "MAX_SERIES", "MAX_SLICES", "render_chart"]
