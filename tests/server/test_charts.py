"""The `chart` block (S6.2) as server-side SVG: every type renders, parses, is accessible and safe."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx
import pytest

from agentkernel.server.charts import MAX_MARKS, MAX_SERIES, MAX_SLICES, MAX_WIDTH, MIN_WIDTH, render_chart
from agentkernel.tools.visual import block_problem
from agentkernel.types import JSONValue, VisualBlock

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '</svg><script>alert(1)</script><text x="0">&amp;'


def chart(kind: str, labels: list[JSONValue], *series: list[JSONValue], **extra: JSONValue) -> VisualBlock:
    block: VisualBlock = {
        "type": "chart",
        "chart": kind,
        "labels": labels,
        "series": [{"name": f"s{i}", "data": data} for i, data in enumerate(series)],
        **extra,
    }
    return block


def parsed(block: VisualBlock) -> ET.Element:
    svg = render_chart(block)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    return root


def marks(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == "mark"]


def mark_titles(root: ET.Element) -> list[str]:
    return [str(m.findtext(f"{SVG}title")) for m in marks(root)]


def notes(root: ET.Element) -> list[str]:
    return [str(e.text) for e in root.iter(f"{SVG}text") if e.get("class") == "note"]


def texts(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter() if e.tag in (f"{SVG}text", f"{SVG}title", f"{SVG}desc")]


@pytest.mark.parametrize("kind", ["bar", "line", "pie"])
def test_each_type_renders_one_mark_per_data_point_with_its_value(kind: str) -> None:
    block = chart(kind, ["мир", "май", "труд"], [2, 1, 3], title="Слова")
    assert block_problem(block) is None  # the block is one tools/visual.py accepts
    root = parsed(block)
    assert root.findtext(f"{SVG}title") == "Слова" and root.get("aria-label") == "Слова"
    titles = mark_titles(root)
    assert len(titles) == 3
    for label, value in (("мир", "2"), ("май", "1"), ("труд", "3")):
        assert any(t.startswith(f"{label} · s0: {value}") for t in titles), titles
    assert any("мир" in t for t in texts(root) if t not in titles)  # a visible label too


def test_bars_and_points_of_several_series() -> None:
    block = chart("bar", ["a", "b"], [1, 2], [3, None])
    assert len(marks(parsed(block))) == 3  # a null has no bar
    line = parsed(chart("line", ["a", "b", "c"], [1, None, 3], [1, 2, 3]))
    assert len(marks(line)) == 5
    assert len(line.findall(f".//{SVG}polyline")) == 1  # the gap splits s0 into two single points
    legend = [e.text for g in line.iter(f"{SVG}g") if g.get("class") == "legend" for e in g]
    assert "s0" in legend and "s1" in legend


def test_hostile_text_stays_text() -> None:
    """Scripts are untrusted: labels, names and titles never become markup."""
    block = chart("bar", [HOSTILE, "\x00\x1b[31mred\ud800"], [1, 2], title=HOSTILE)
    block["series"] = [{"name": HOSTILE, "data": [1, 2]}]
    svg = render_chart(block)
    assert "<script" not in svg and "</svg><" not in svg.removesuffix("</svg>")
    root = ET.fromstring(svg)  # characters XML cannot carry were dropped, so it parses
    assert [e.tag for e in root.iter() if "script" in e.tag] == []
    assert root.findtext(f"{SVG}title") == HOSTILE
    assert any(t.startswith(HOSTILE) for t in mark_titles(root))
    assert any(t.startswith("[31mred") for t in mark_titles(root))
    pie = render_chart(chart("pie", [HOSTILE], [1], title=HOSTILE))
    assert "<script" not in pie and ET.fromstring(pie).findtext(f"{SVG}title") == HOSTILE


@pytest.mark.parametrize("kind", ["bar", "line", "pie"])
def test_empty_charts_render_with_a_note(kind: str) -> None:
    root = parsed(chart(kind, [], []))
    assert marks(root) == [] and notes(root) == ["no data to draw"]
    nulls = parsed(chart(kind, ["a"], [None]))
    assert marks(nulls) == [] and "no data to draw" in notes(nulls)


def test_negative_values_draw_below_zero_and_a_pie_leaves_them_out() -> None:
    root = parsed(chart("bar", ["up", "down"], [5, -5]))
    up, down = marks(root)
    assert float(up.get("y", "0")) + float(up.get("height", "0")) == pytest.approx(float(down.get("y", "0")))
    pie = parsed(chart("pie", ["a", "b", "c"], [3, -1, 0]))
    assert len(marks(pie)) == 1 and pie.find(f".//{SVG}circle") is not None  # one slice: the whole circle
    assert notes(pie) == ["2 value(s) not drawn: a pie shows only positive values"]


def test_huge_values_and_not_finite_numbers() -> None:
    """Finite values near the float limit draw without overflow; NaN, infinities and the like are skipped."""
    huge = parsed(chart("bar", ["a", "b"], [1.7e308, -1.7e308]))
    for mark in marks(huge):
        assert all(float(mark.get(k, "nan")) < 1e6 for k in ("x", "y", "width", "height"))
    pie = parsed(chart("pie", ["a", "b"], [1.7e308, 1.7e308]))
    assert [t.endswith("(50.0%)") for t in mark_titles(pie)] == [True, True]
    odd = chart("line", ["a", "b", "c", "d", "e"], [1, float("nan"), float("inf"), True, 10**400])
    root = parsed(odd)
    assert len(marks(root)) == 1
    assert notes(root) == ["4 value(s) skipped: not finite numbers (NaN, infinity or not a number)"]


def test_size_is_bounded_with_a_note() -> None:
    many = [f"label {i} " + "x" * 500 for i in range(50_000)]
    data: list[JSONValue] = [i % 7 for i in range(50_000)]
    block = chart("bar", list(many), *[data] * (MAX_SERIES + 3))
    svg = render_chart(block)
    root = ET.fromstring(svg)
    assert len(marks(root)) == MAX_MARKS
    assert len(svg) < 400_000
    assert notes(root) == [
        f"showing the first {MAX_MARKS // MAX_SERIES:,} of 50,000 labels",
        f"showing {MAX_SERIES} of {MAX_SERIES + 3} series",
    ]


def test_a_pie_keeps_its_largest_slices_and_sums_the_rest() -> None:
    values: list[JSONValue] = list(range(1, 31))
    root = parsed(chart("pie", [f"l{v}" for v in values], values))
    titles = mark_titles(root)
    assert len(titles) == MAX_SLICES
    assert titles[0].startswith("l30 · s0: 30")
    rest = sum(range(1, 31 - (MAX_SLICES - 1)))
    assert titles[-1].startswith(f"other · s0: {rest}")
    assert notes(root) == [f"the {30 - (MAX_SLICES - 1)} smallest slices are shown together as “other”"]


def test_labels_of_any_json_type_and_long_ones_are_clipped_on_the_chart_only() -> None:
    long = "word " * 100
    root = parsed(chart("bar", [1, None, {"k": "v"}, long], [1, 2, 3, 4]))
    titles = mark_titles(root)
    assert [t.split(" · ")[0] for t in titles[:3]] == ["1", "null", '{"k": "v"}']
    assert titles[3].startswith(long[:150])
    visible = [e.text or "" for e in root.iter(f"{SVG}text")]
    assert all(len(t) <= 80 for t in visible)


def test_a_block_that_is_no_chart_is_refused() -> None:
    with pytest.raises(ValueError, match="not a chart block"):
        render_chart({"type": "chart", "chart": "area", "labels": [], "series": []})
    with pytest.raises(ValueError, match=r"series\[0\] needs a `data` list"):
        render_chart({"type": "chart", "chart": "bar", "labels": [], "series": [{"name": "x"}]})


def _luminance(color: str) -> float:
    def channel(hex_pair: str) -> float:
        c = int(hex_pair, 16) / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(color[i : i + 2]) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_on_white(color: str) -> float:
    """WCAG's contrast ratio of a #rrggbb colour on white."""
    return 1.05 / (_luminance(color) + 0.05)


@pytest.mark.parametrize("width", [240, 294, 640, 800])
@pytest.mark.parametrize("kind", ["bar", "line", "pie"])
def test_a_chart_is_drawn_at_the_width_it_is_shown_with_readable_text(kind: str, width: int) -> None:
    """Issue 26 §6: the tools panel shrank a 640 px chart to 294 px, and its 11 px text to 5 px.

    Drawn at the width asked for, every text is 11 px or more where it is shown, dark on white
    (WCAG AA's 4.5:1 at least), and inside the drawing, a narrow pie's legend too.
    """
    labels: list[JSONValue] = ["Q1", "Q2", "Q3", "Q4", "a fifth quarter"]
    root = ET.fromstring(render_chart(chart(kind, labels, [12, 19, 7, 15, 4], [14, 21, 11, 18, 2]), width))
    assert root.get("width") == str(width) and root.get("viewBox", "").startswith(f"0 0 {width} ")
    height = float(root.get("height", "0"))
    default_fill, default_size = root.get("fill", "#000000"), float(root.get("font-size", "0"))
    shown = [e for e in root.iter(f"{SVG}text") if e.text]
    assert len(shown) >= 5
    for text in shown:
        assert float(text.get("font-size", default_size)) >= 11, text.text
        assert contrast_on_white(text.get("fill", default_fill)) >= 4.5, text.text
        assert 0 <= float(text.get("x", "0")) <= width and 0 <= float(text.get("y", "0")) <= height, text.text
    for mark in marks(root):
        if mark.tag == f"{SVG}rect":
            left = float(mark.get("x", "-1"))
            assert left >= 0 and left + float(mark.get("width", "0")) <= width
        if mark.tag == f"{SVG}circle" and kind == "pie":
            r, cx = float(mark.get("r", "0")), float(mark.get("cx", "0"))
            assert r <= cx <= width - r


def test_the_width_asked_for_is_bounded(client: httpx.Client) -> None:
    block = chart("bar", ["a"], [1])
    assert ET.fromstring(client.post("/v1/charts/svg?width=300", json=block).text).get("width") == "300"
    assert ET.fromstring(client.post("/v1/charts/svg", json=block).text).get("width") == "640"
    for width in (MIN_WIDTH - 1, MAX_WIDTH + 1):
        refused = client.post(f"/v1/charts/svg?width={width}", json=block)
        assert refused.status_code == 422 and "width" in refused.text
