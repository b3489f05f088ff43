"""The web page's server side through the real server (issue 11 section 4): the page, its files, its reads.

What the page does in a browser is tests/server/test_page_browser.py.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import httpx

from agentkernel.server.routes.page import CONTENT_SECURITY_POLICY, STATIC


def test_the_page_is_served_with_a_strict_policy_and_its_files_from_the_package(client: httpx.Client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    sources = re.findall(r'(?:src|href)="(/[^"]*)"', page.text)
    assert set(sources) == {
        "/static/app.css",
        "/static/app.js",
        "/static/vendor/marked/marked.umd.js",
        "/static/vendor/dompurify/purify.min.js",
    }
    for source in sources:
        served = client.get(source)
        assert served.status_code == 200, source
        assert served.content == (STATIC / source.removeprefix("/static/")).read_bytes()
    assert client.get("/static/../app.py").status_code == 404


def test_nothing_in_the_page_reaches_the_network() -> None:
    """No CDN: the page's own files name no other host (the vendored libraries are checked by hash)."""
    for name in ("index.html", "app.js", "app.css"):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), name


def test_no_page_of_the_server_loads_script_from_another_host(client: httpx.Client) -> None:
    """S23.6: FastAPI's /docs and /redoc pages load Swagger UI and ReDoc from a CDN, with no integrity
    check and no policy, on the origin whose localStorage holds the page's bearer token: a script of
    another host's choosing could read it. They are not served; /openapi.json is the API's description."""
    for path in ("/docs", "/docs/oauth2-redirect", "/redoc"):
        assert client.get(path).status_code == 404, path
    assert client.get("/openapi.json").status_code == 200


def test_templates_for_the_new_chat_picker(client: httpx.Client) -> None:
    assert client.get("/v1/templates").json() == [{"name": "tester", "description": ""}]


def test_a_chart_block_is_drawn_as_svg_on_the_server(client: httpx.Client) -> None:
    block = {
        "type": "chart",
        "chart": "bar",
        "title": "</title><script>alert(1)</script>",
        "labels": ["a", "b"],
        "series": [{"name": "n", "data": [1, 2]}],
    }
    drawn = client.post("/v1/charts/svg", json=block)
    assert drawn.status_code == 200 and drawn.headers["content-type"].startswith("image/svg+xml")
    svg = ET.fromstring(drawn.text)
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert not svg.findall(".//{http://www.w3.org/2000/svg}script")
    refused = client.post("/v1/charts/svg", json={"type": "table", "rows": []})
    assert refused.status_code == 422 and "not a chart block" in refused.json()["detail"]
