"""The web page: `GET /`, its static files, and the two small reads only it needs.

- `GET /` is static/index.html with a strict Content-Security-Policy: scripts
  and styles only from this server, images also as `data:` (the charts), no
  inline script, no plugins, no framing. The answer is Markdown written by a
  model that a script's result can steer; marked's HTML goes through
  DOMPurify, and the policy is the second wall if something slips through.
- `/static/…` serves the page's files (app.js, app.css, vendor/) from the
  package: nothing is fetched from the network at run time.
- `GET /v1/templates` lists the templates that load, for the new-chat picker.
- `POST /v1/charts/svg[?width=PX]` draws a `chart` block as SVG on the
  server (charts.py, which says why server-side), as wide as the box the
  page shows it in, so its text stays readable; the page shows it as an
  `<img>` from a `data:` URL, so nothing in it can run.

The page itself needs no token to load (it is where the token is typed);
every API call it makes does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from agentkernel.server.charts import MAX_WIDTH, MIN_WIDTH, WIDTH, render_chart
from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented

STATIC: Final = Path(__file__).resolve().parent.parent / "static"
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
SVG_MEDIA_TYPE: Final = "image/svg+xml"

ChartBlock = Annotated[dict[str, Any], Body(description="a `chart` visual block (S6.2)")]
ChartWidth = Annotated[
    int, Query(ge=MIN_WIDTH, le=MAX_WIDTH, description="px: the width of the box the chart is shown in")
]

router = APIRouter(tags=["page"], responses=documented(*CALLER))


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    """The web chat."""
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html; charset=utf-8",
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


@router.get("/v1/templates")
def list_templates(_: User, parts: Parts) -> list[dict[str, str]]:
    """`[{name, description}]`: the templates that load, by name (a session's `template`)."""
    return [{"name": t.name, "description": t.description} for t in parts.kernel.list_templates()]


@router.post(
    "/v1/charts/svg",
    response_class=Response,
    responses={200: {"content": {SVG_MEDIA_TYPE: {}}, "description": "the chart as SVG"}, **documented(413)},
)
def chart_svg(_: User, block: ChartBlock, width: ChartWidth = WIDTH) -> Response:
    """A `chart` block drawn as a self-contained SVG `width` px wide (no script, no external reference).

    422 if the block is no chart, or `width` is out of bounds.
    """
    try:
        svg = render_chart(block, width)
    except ValueError as exc:
        raise HTTPException(422, f"body: {exc}") from exc
    return Response(svg, media_type=SVG_MEDIA_TYPE, headers={"X-Content-Type-Options": "nosniff"})


def install(app: FastAPI) -> None:
    """The page's routes and its static files, on `app`."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")


__all__ = ["CONTENT_SECURITY_POLICY", "install", "router"]
