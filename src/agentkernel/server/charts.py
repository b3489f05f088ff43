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

- **Drawn at the width it is shown**: the page asks for the width of the
  box the chart goes in (`width`, clamped to MIN_WIDTH-MAX_WIDTH), so text
  is 12 px where it is seen, in the chat as in the narrow tools panel; a
  640 px chart shrunk into the panel had 5 px labels. Text is dark on
  white (at least 7:1); a narrow pie puts its legend under it.

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

WIDTH, HEIGHT = 640, 360  # the default size; a chart asked for another width keeps this shape
MIN_WIDTH, MAX_WIDTH = 240, 1600
MIN_HEIGHT, MAX_HEIGHT = 240, 540
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 48, 56
FONT_SIZE, TITLE_SIZE = 12, 15  # px where the chart is shown at its own width
TEXT, GRID, AXIS, QUIET = "#1b1b1b", "#d9d9d9", "#595959", "#4d4d4d"  # text at least 7:1 on white
LEGEND_ROW = 18
PIE_LEGEND_WIDTH = 220  # a pie whose legend does not fit beside it this wide puts the legend under it
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


@dataclass(frozen=True)
class _Frame:
    """The drawing's size in px (shown at this size: the page asks for the width it has)."""

    width: int
    height: int

    @property
    def plot_w(self) -> float:
        return self.width - LEFT - RIGHT

    @property
    def plot_h(self) -> float:
        return self.height - TOP - BOTTOM


@dataclass
class _Chart:
    kind: str
    title: str
    labels: list[str]
    series: list[_Series]
    notes: list[str] = field(default_factory=list)


def render_chart(block: VisualBlock, width: int = WIDTH) -> str:
    """The SVG text of one `chart` block, `width` px wide; ValueError when the block is not a chart at all.

    A well-formed block (tools/visual.py's schema) always renders: what
    cannot be drawn is left out and a note under the chart says what and why.
    """
    chart = _read_chart(block)
    slices = _pie_slices(chart) if chart.kind == "pie" else []
    frame = _frame(width, len(slices), len(chart.notes))
    svg = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {frame.width} {frame.height}",
            "width": str(frame.width),
            "height": str(frame.height),
            "role": "img",
            "aria-label": chart.title,
            "class": f"chart chart-{chart.kind}",
            "font-family": "sans-serif",
            "font-size": str(FONT_SIZE),
            "fill": TEXT,
        },
    )
    ET.SubElement(svg, "title").text = chart.title
    desc = ET.SubElement(svg, "desc")
    attrs = {"x": str(frame.width / 2), "y": "20", "text-anchor": "middle", "font-size": str(TITLE_SIZE)}
    ET.SubElement(svg, "text", {**attrs, "font-weight": "bold"}).text = _clip(
        chart.title, max(8, min(80, frame.width // 9))
    )
    if chart.kind == "pie":
        _draw_pie(svg, chart, slices, frame)
    else:
        _draw_axes_chart(svg, chart, frame)
    desc.text = _summary(chart)
    _draw_notes(svg, chart.notes, frame)
    return ET.tostring(svg, encoding="unicode")


def _frame(width: int, pie_slices: int, notes: int) -> _Frame:
    """The size to draw at: `width` within bounds, the default's shape; a narrow pie fits its legend under."""
    shown = min(MAX_WIDTH, max(MIN_WIDTH, width))
    height = min(MAX_HEIGHT, max(MIN_HEIGHT, round(shown * HEIGHT / WIDTH)))
    if pie_slices and _pie_legend_under(shown):
        radius = _narrow_pie_radius(shown)
        legend = LEGEND_ROW * pie_slices
        height = TOP + 2 * radius + 16 + legend + 8 + NOTE_LINE_HEIGHT * min(notes, MAX_NOTES)
    return _Frame(shown, round(height))


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


def _draw_axes_chart(svg: ET.Element, chart: _Chart, frame: _Frame) -> None:
    values = [v for s in chart.series for v in s.values if v is not None]
    if not values:
        chart.notes.append("no data to draw")
        return
    low, high, ticks = _ticks(min(0.0, *values), max(0.0, *values))
    plot_w, plot_h = frame.plot_w, frame.plot_h

    def y_of(value: float) -> float:
        # halves first: high - low may overflow for finite values near the float limit
        return TOP + plot_h * (1 - (value / 2 - low / 2) / (high / 2 - low / 2))

    _draw_y_axis(svg, ticks, y_of, frame)
    _draw_x_labels(svg, chart.labels, frame)
    _draw_legend(svg, chart.series, frame)
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


def _draw_y_axis(svg: ET.Element, ticks: Sequence[float], y_of: _YOf, frame: _Frame) -> None:
    """Value ticks: a grid line and its value, right-aligned and centred on the line."""
    axis = ET.SubElement(svg, "g", {"class": "axis"})
    right = str(frame.width - RIGHT)
    for value in ticks:
        y = f"{y_of(value):.1f}"
        ET.SubElement(axis, "line", {"x1": str(LEFT), "x2": right, "y1": y, "y2": y, "stroke": GRID})
        attrs = {"x": str(LEFT - 6), "y": y, "text-anchor": "end", "dominant-baseline": "middle"}
        ET.SubElement(axis, "text", attrs).text = _clip(_fmt(value), 9)
    zero = f"{y_of(0.0):.1f}"
    ET.SubElement(axis, "line", {"x1": str(LEFT), "x2": right, "y1": zero, "y2": zero, "stroke": AXIS})


def _draw_x_labels(svg: ET.Element, labels: Sequence[str], frame: _Frame) -> None:
    """Category labels under the plot; every k-th when they do not fit (each mark's title has its own)."""
    axis = ET.SubElement(svg, "g", {"class": "axis"})
    slot = frame.plot_w / max(1, len(labels))
    every = max(1, math.ceil(len(labels) / max(1, int(frame.plot_w // 52))))
    for i in range(0, len(labels), every):
        x = f"{LEFT + slot * (i + 0.5):.1f}"
        attrs = {"x": x, "y": str(frame.height - BOTTOM + 18), "text-anchor": "middle"}
        ET.SubElement(axis, "text", attrs).text = _clip(labels[i], min(MAX_LABEL_CHARS, 7 * every))


def _draw_legend(svg: ET.Element, series: Sequence[_Series], frame: _Frame) -> None:
    legend = ET.SubElement(svg, "g", {"class": "legend"})
    step = frame.plot_w / max(1, len(series))
    for index, entry in enumerate(series):
        x = LEFT + step * index
        color = PALETTE[index % len(PALETTE)]
        attrs = {"x": f"{x:.1f}", "y": "29", "width": "11", "height": "11", "fill": color}
        ET.SubElement(legend, "rect", attrs)
        ET.SubElement(legend, "text", {"x": f"{x + 15:.1f}", "y": "39"}).text = _clip(
            entry.name, max(2, int((step - 15) // 7))
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


def _pie_slices(chart: _Chart) -> list[tuple[str, float]]:
    """The first series' slices, largest first; negatives and zeros left out, the smallest merged (noted)."""
    series = chart.series[0] if chart.series else _Series("", [])
    slices = [(chart.labels[i], v) for i, v in enumerate(series.values) if v is not None and v > 0]
    left_out = sum(1 for v in series.values if v is not None and v <= 0)
    if left_out:
        chart.notes.append(f"{left_out} value(s) not drawn: a pie shows only positive values")
    if not slices:
        chart.notes.append("no data to draw")
        return []
    slices.sort(key=lambda s: -s[1])
    if len(slices) > MAX_SLICES:
        rest = slices[MAX_SLICES - 1 :]
        chart.notes.append(f"the {len(rest)} smallest slices are shown together as “other”")
        slices = [*slices[: MAX_SLICES - 1], ("other", math.fsum(v for _, v in rest))]
    return slices


def _pie_legend_under(width: int) -> bool:
    return width - PIE_LEGEND_WIDTH < 2 * 80 + 48  # no room beside the pie for a radius of 80 px


def _narrow_pie_radius(width: int) -> int:
    return min(90, (width - 32) // 2)


def _draw_pie(svg: ET.Element, chart: _Chart, slices: Sequence[tuple[str, float]], frame: _Frame) -> None:
    """The slices (`_pie_slices`) with a legend of label and share: beside the pie, or under a narrow one."""
    if not slices:
        return
    series = chart.series[0]
    largest = slices[0][1]  # shares computed on values scaled by the largest: no overflow
    total = math.fsum(v / largest for _, v in slices)
    if _pie_legend_under(frame.width):
        radius = float(_narrow_pie_radius(frame.width))
        cx, cy = frame.width / 2, TOP + radius
        legend_x, legend_y = 16.0, TOP + 2 * radius + 16
    else:
        radius = min(frame.plot_h / 2, (frame.width - PIE_LEGEND_WIDTH - 48) / 2)
        cx, cy = 24 + radius, TOP + frame.plot_h / 2
        legend_x, legend_y = cx + radius + 24, float(TOP)
    label_chars = max(4, int((frame.width - legend_x - 14 - 60) // 7))
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
        y = legend_y + index * LEGEND_ROW
        attrs = {"x": f"{legend_x:.1f}", "y": f"{y:.1f}", "width": "11", "height": "11", "fill": color}
        ET.SubElement(legend, "rect", attrs)
        text = f"{_clip(label, min(MAX_LABEL_CHARS, label_chars))} ({share:.1%})"
        ET.SubElement(legend, "text", {"x": f"{legend_x + 15:.1f}", "y": f"{y + 10:.1f}"}).text = text


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


def _draw_notes(svg: ET.Element, notes: Sequence[str], frame: _Frame) -> None:
    shown = list(notes[:MAX_NOTES])
    for index, note in enumerate(shown):
        y = frame.height - 4 - NOTE_LINE_HEIGHT * (len(shown) - 1 - index)
        attrs = {"x": "8", "y": str(y), "class": "note", "fill": QUIET, "font-size": "11"}
        ET.SubElement(svg, "text", attrs).text = _clip(note, max(20, frame.width // 6))


def _summary(chart: _Chart) -> str:
    names = ", ".join(s.name for s in chart.series)
    text = f"{chart.kind} chart, {len(chart.labels)} label(s), series: {names or 'none'}"
    return text + "".join(f". {note}" for note in chart.notes)


__all__ = ["MAX_MARKS", "MAX_SERIES", "MAX_SLICES", "MAX_WIDTH", "MIN_WIDTH", "WIDTH", "render_chart"]
