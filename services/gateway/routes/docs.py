"""The API docs pages (Swagger UI at /docs, ReDoc at /redoc) and the CSP each needs to work.

FastAPI's own docs routes are off: these render the same pages once, so the policy can
allow their one inline script by its hash instead of allowing inline script at all.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

CDN = "https://cdn.jsdelivr.net"
FAVICON_HOST = "https://fastapi.tiangolo.com"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_router(*, title: str, openapi_url: str) -> tuple[APIRouter, dict[str, str]]:
    """The /docs and /redoc routes, and the CSP of each page by path."""
    pages = {
        "/docs": get_swagger_ui_html(openapi_url=openapi_url, title=f"{title} - Swagger UI"),
        "/redoc": get_redoc_html(openapi_url=openapi_url, title=f"{title} - ReDoc"),
    }
    router = APIRouter(include_in_schema=False)
    for path, page in pages.items():
        body = bytes(page.body)
        router.add_api_route(path, _serve(body), methods=["GET"], response_class=HTMLResponse)
    return router, {path: _policy(bytes(page.body).decode()) for path, page in pages.items()}


def _serve(body: bytes) -> Callable[[], HTMLResponse]:
    def page() -> HTMLResponse:
        return HTMLResponse(body)

    return page


def _policy(html: str) -> str:
    """The CDN's bundles, the page's own inline scripts by hash; styles may be inline (the
    bundles set style attributes), fonts and images from the CDN, favicon and fonts hosts."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'none'; script-src 'self' {CDN} {hashes}; "
        f"style-src 'self' 'unsafe-inline' {CDN} https://fonts.googleapis.com; "
        f"font-src {CDN} https://fonts.gstatic.com; img-src 'self' data: {CDN} {FAVICON_HOST}; "
        f"connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
