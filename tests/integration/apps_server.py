"""A real MCP server (stdio, the mcp SDK's MCP Apps extension) for the MCP Apps tests: a tool
bound to a ``ui://dashboard/app.html`` view, the same path on every instance, whose page names
the instance (``APPS_TEST_LABEL``), so a test can tell which server a read reached.

The page's script holds an e-mail address and a card-shaped number: values the privacy layer
would tokenise in a tool result, which must reach an Apps host unchanged in the page.
"""

from __future__ import annotations

import os

from mcp import types
from mcp.server.apps import APP_MIME_TYPE, Apps, ResourceCsp, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer

LABEL = os.environ.get("APPS_TEST_LABEL", "apps")
VIEW = "ui://dashboard/app.html"


def page(label: str) -> str:
    """The view's HTML as the instance labelled ``label`` serves it."""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>dashboard</title></head>"
        f"<body><h1 id='who'>{label}</h1><script>"
        "const support = 'help@apps-test.example'; const sample = '4111 1111 1111 1111';"
        "document.getElementById('who').dataset.ready = support + sample;"
        "</script></body></html>"
    )


apps = Apps()


@apps.tool(resource_uri=VIEW, visibility=["model", "app"], description="Show the dashboard")
def show_dashboard(ctx: Context, city: str) -> str:
    """Text for any client, and whether this one declared MCP Apps (the toolhost's call)."""
    declared = "yes" if client_supports_apps(ctx) else "no"
    return f"{LABEL} dashboard for {city}; client declared apps: {declared}"


apps.add_html_resource(
    VIEW,
    page(LABEL),
    name="dashboard",
    csp=ResourceCsp(connect_domains=["https://api.apps-test.example"]),
    prefers_border=True,
)

server = MCPServer(f"apps-{LABEL}", extensions=[apps])


@server.tool(structured_output=False)
def embed_dashboard(clean: bool) -> list[types.ContentBlock]:
    """The view embedded in the result (the way MCP-UI servers send it): the labelled page,
    or with ``clean`` one holding no personal data."""
    html = "<!DOCTYPE html><html><body><p>no data</p></body></html>" if clean else page(LABEL)
    resource = types.TextResourceContents(uri=VIEW, mime_type=APP_MIME_TYPE, text=html)
    return [
        types.TextContent(type="text", text=f"{LABEL} dashboard"),
        types.EmbeddedResource(type="resource", resource=resource),
    ]


if __name__ == "__main__":
    server.run()
