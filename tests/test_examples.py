"""The shipped examples in config/scripts/ work as the manual shows (S2.6), through dispatch."""

from __future__ import annotations

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.types import JSONValue
from tests.conftest import REPO

WARNING = "Не удалось проанализировать текст"


@pytest.fixture(scope="module")
def shipped() -> Kernel:
    return Kernel(load_kernel_config(REPO / "config" / "kernel.yaml"))


def test_every_shipped_file_loads(shipped: Kernel) -> None:
    assert shipped.problems() == []
    assert {"text_stats", "text_stats_rhai", "wordcount", "currency"} <= {
        s.name for s in shipped.list_tools()
    }


EMPTY = "текст пуст"


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Привет, мир", "Символов: 11, слов: 2, предложений: 1"),
        ("Раз. Два! Три?", "Символов: 14, слов: 3, предложений: 3"),
        ("", EMPTY),
        ("   ", EMPTY),
        ("\n\t \u3000\n", EMPTY),
        ("слово", "Символов: 5, слов: 1, предложений: 1"),
        ("  один   два  три ", "Символов: 18, слов: 3, предложений: 1"),
        ("Первая строка.\nВторая строка\n\nтретья", "Символов: 36, слов: 5, предложений: 2"),
        ("Что?! Да… Ну", "Символов: 12, слов: 3, предложений: 3"),
        ("Число 3.14 — не конец. А это конец.", "Символов: 35, слов: 8, предложений: 2"),
        ("...", "Символов: 3, слов: 1, предложений: 0"),
        ("Ой . . . ну", "Символов: 11, слов: 5, предложений: 2"),
        ("😀 ок!", "Символов: 5, слов: 2, предложений: 1"),
        # Unicode White_Space in both engines: NEL (U+0085) separates words, a BOM does not.
        ("а\u0085б", "Символов: 3, слов: 2, предложений: 1"),
        ("\ufeffПривет", "Символов: 7, слов: 1, предложений: 1"),
        ("a\u00a0b\u2003c", "Символов: 5, слов: 3, предложений: 1"),
    ],
)
def test_text_stats_counts_the_same_in_both_engines(shipped: Kernel, text: str, content: str) -> None:
    """S2.6: characters, words and sentences, as the description says; JS and Rhai agree."""
    js = shipped.run_tool("text_stats", {"text": text}).to_json()
    rhai = shipped.run_tool("text_stats_rhai", {"text": text}).to_json()
    assert js == rhai
    assert js["content"] == content
    if content == EMPTY:
        assert (js["success"], js["error"], js["warnings"]) == (False, "empty text", [WARNING])
    else:
        assert (js["success"], js["error"], js["warnings"]) == (True, None, [])


@pytest.mark.parametrize(
    ("args", "content"),
    [
        ({"amount": 100, "from": "usd", "to": "RUB"}, "100.0 USD = 9250.0 RUB"),
        ({"amount": 1000, "from": "RUB", "to": "eur"}, "1000.0 RUB = 10.02 EUR"),
        ({"amount": 2.5, "from": "EUR", "to": "EUR"}, "2.5 EUR = 2.5 EUR"),
    ],
)
def test_currency_reads_rates_from_its_yaml(
    shipped: Kernel, args: dict[str, JSONValue], content: str
) -> None:
    result = shipped.run_tool("currency", args)
    assert (result.content, result.success) == (content, True)


def test_currency_unknown_code(shipped: Kernel) -> None:
    result = shipped.run_tool("currency", {"amount": 1, "from": "XXX", "to": "RUB"})
    assert (result.content, result.success) == ("неизвестная валюта: XXX", False)
    assert result.warnings == ["Не удалось пересчитать валюту"]


def test_text_stats_empty_text_fails_with_the_yaml_warning(shipped: Kernel) -> None:
    result = shipped.run_tool("text_stats", {"text": "   "})
    assert result.to_json() == {
        "content": "текст пуст",
        "success": False,
        "error": "empty text",
        "visual": None,
        "warnings": [WARNING],
    }


def test_wordcount_summary_table_and_chart(shipped: Kernel) -> None:
    result = shipped.run_tool(
        "wordcount", {"text": "Мама мыла раму, и мама пела. The end of the end", "top": 3}
    )
    assert result.success is True
    assert result.content == "Слов: 7, разных: 5. Чаще всего — end: 2, мама: 2, мыла: 1"
    table, chart = result.visual
    assert table["rows"] == [
        {"word": "end", "count": 2},
        {"word": "мама", "count": 2},
        {"word": "мыла", "count": 1},
    ]
    assert chart["labels"] == ["end", "мама", "мыла"] and chart["series"] == [
        {"name": "раз", "data": [2, 2, 1]}
    ]


def test_wordcount_table_pages_through_continuations(shipped: Kernel) -> None:
    """S6.3: more words than `top` → the table's continuation args ask this tool for the next page."""
    text = "x x x x y y y z z w"
    first = shipped.run_tool("wordcount", {"text": text, "top": 2})
    table = first.visual[0]
    assert table["rows"] == [{"word": "x", "count": 4}, {"word": "y", "count": 3}]
    assert table["continuation"] == {"args": {"text": text, "top": 2, "offset": 2}}
    second = shipped.run_tool("wordcount", table["continuation"]["args"])
    assert second.content == "Слова 3–4 из 4: z: 2, w: 1"
    (page,) = second.visual  # a next page is its rows only, no second chart
    assert page["rows"] == [{"word": "z", "count": 2}, {"word": "w", "count": 1}]
    assert "continuation" not in page


def test_wordcount_reads_stopwords_from_its_yaml(shipped: Kernel) -> None:
    result = shipped.run_tool("wordcount", {"text": "и и и в на"})
    assert (result.content, result.success) == ("текст пуст", False)
    assert result.warnings == ["Не удалось посчитать слова"]


def test_wordcount_rejects_bad_top(shipped: Kernel) -> None:
    result = shipped.run_tool("wordcount", {"text": "a", "top": 0})
    assert result.content == "invalid arguments for wordcount: top: 0 is less than the minimum of 1"
