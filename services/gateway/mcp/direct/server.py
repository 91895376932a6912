"""The low-level MCP server of one direct endpoint: its identity, capabilities and handlers,
and the request-state boundary that keeps a ``requestState`` to that endpoint."""

from __future__ import annotations

from functools import partial
from typing import Any

from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary

from services.gateway.mcp import input_required, legacy_tasks, log_messages, task_notices
from services.gateway.mcp import listen as listening_streams
from services.gateway.mcp.caching import CACHE_HINTS
from services.gateway.mcp.direct import prompts, resources, tools
from services.gateway.mcp.direct import tasks as direct_tasks
from services.gateway.mcp.direct.endpoint import Endpoint
from services.gateway.mcp.tasks import EXTENSION_ID
from shared.tools import apps
from shared.version import VERSION

AGGREGATE = "agentcards-direct"  # serverInfo name of /mcp/servers
AGGREGATE_INSTRUCTIONS = (
    "Every tool of every MCP server this AgentCards gateway federates, called directly. "
    "A tool is named <server>.<tool> (server names hold no dot); with the request header "
    "X-AgentCards-Tool-Names: bare (or ?names=bare) by its own name unless two servers share "
    "it. For multi-step work, AgentCards' code mode at /mcp runs Python that calls these "
    "tools in one round trip."
)


def endpoint_server(endpoint: Endpoint) -> Server[Any]:
    """The low-level server of one endpoint (``endpoint.name`` None: the aggregate)."""
    name = endpoint.name
    server = _DirectServer(
        AGGREGATE if name is None else name,
        version=VERSION,  # a server's endpoint takes the server's own when it is known
        title=None if name is None else f"{name} (through AgentCards)",
        instructions=AGGREGATE_INSTRUCTIONS if name is None else None,
        on_list_tools=partial(tools.list_tools, endpoint),
        # A task answers as a mapping: the SDK's runner serializes any handler result.
        on_call_tool=partial(tools.call_tool, endpoint),  # type: ignore[arg-type]
        on_list_resources=partial(resources.list_resources, endpoint),
        on_list_resource_templates=partial(resources.list_templates, endpoint),
        on_read_resource=partial(resources.read_resource, endpoint),
        on_subscribe_resource=partial(resources.subscribe, endpoint),
        on_unsubscribe_resource=partial(resources.unsubscribe, endpoint),
        on_subscriptions_listen=listening_streams.listen_handler(
            name, partial(resources.subscribe_downstream, endpoint)
        ),
        on_list_prompts=partial(prompts.list_prompts, endpoint),
        on_get_prompt=partial(prompts.get_prompt, endpoint),
        on_completion=partial(prompts.complete, endpoint),
        cache_hints=CACHE_HINTS,
    )
    log_messages.register(server)  # the server's own log messages during a call
    task_methods = direct_tasks.task_methods(endpoint)
    for method in task_methods.bindings():
        server.add_request_handler(method.method, method.params_type, method.handler)
    # 2025-11-25's tasks (legacy_tasks.py): every direct call takes them.
    server.middleware.append(legacy_tasks.LegacyTasks(task_methods, lambda _name: True))
    server.middleware.append(task_notices.TaskNotices(task_methods))  # on listen streams
    server.extensions[EXTENSION_ID] = {}
    if name is None:  # every server's views pass through here; a server's endpoint says
        server.extensions[apps.EXTENSION_ID] = {}  # so when its server offers Apps (surface.py)
    # requestState sealed and checked as on /mcp; the audience keeps it to this endpoint.
    security = input_required.state_security(endpoint.get_state)
    audience = f"agentcards-direct:{AGGREGATE if name is None else name}"
    server.middleware.append(RequestStateBoundary(security, default_audience=audience))
    return server


class _DirectServer(Server[Any]):
    """A low-level server that declares ``listChanged`` for tools, resources and prompts (the
    SDK's session manager builds the initialize answer without notification options)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(
                tools_changed=True, resources_changed=True, prompts_changed=True
            ),
            experimental_capabilities,
            extensions,
        )
