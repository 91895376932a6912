"""The API docs page (Swagger UI at /docs) and its CSP: served offline from the package.

FastAPI's own docs routes are off: this renders the page once, with Swagger UI from the
vendored copy under /static/vendor (services/gateway/vendor-src), so the policy can allow
exactly 'self' and the page's one inline script by its hash. /redoc (a CDN-only bundle
before) now redirects to /docs: one docs page, nothing fetched from elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse

SWAGGER = "/static/vendor/swagger-ui-dist"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_router(*, title: str, openapi_url: str) -> tuple[APIRouter, dict[str, str]]:
    """The /docs and /redoc routes, and the CSP of the docs page by path."""
    page = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{title} - Swagger UI",
        swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js",
        swagger_css_url=f"{SWAGGER}/swagger-ui.css",
        swagger_favicon_url=f"{SWAGGER}/favicon-32x32.png",
        # No "valid spec" badge: it is an image from validator.swagger.io.
        swagger_ui_parameters={"validatorUrl": None},
    )
    body = bytes(page.body)
    router = APIRouter(include_in_schema=False)
    router.add_api_route("/docs", _serve(body), methods=["GET"], response_class=HTMLResponse)
    router.add_api_route("/redoc", _to_docs, methods=["GET"])
    return router, {"/docs": _policy(body.decode())}


def _serve(body: bytes) -> Callable[[], HTMLResponse]:
    def page() -> HTMLResponse:
        return HTMLResponse(body)

    return page


def _to_docs() -> RedirectResponse:
    return RedirectResponse("/docs", status_code=307)


def _policy(html: str) -> str:
    """Bundles from 'self', the page's inline script by hash; styles may be inline (Swagger UI
    sets style attributes); images from 'self' and data: URIs (its icons)."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    )
