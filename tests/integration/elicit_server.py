"""A real MCP server (stdio, the mcp SDK) whose tools ask their client mid-call, for the
multi-round-trip tests: ``ask_name`` elicits a name and returns what the user answered;
``ask_model`` asks the client's model (sampling) and returns its text."""

from __future__ import annotations

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("elicit-test")


class Name(BaseModel):
    """What ``ask_name`` asks for."""

    name: str


@server.tool()
async def ask_name(question: str, ctx: Context) -> dict[str, object]:
    """Ask the user ``question`` (elicitation) and return the action and the name given."""
    answer = await ctx.elicit(question, Name)
    name = answer.data.name if answer.action == "accept" else None
    return {"action": answer.action, "name": name}


@server.tool()
async def ask_model(prompt: str, ctx: Context) -> dict[str, object]:
    """Ask the client's model ``prompt`` (sampling) and return its text."""
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=prompt)
    )
    result = await ctx.session.create_message(messages=[message], max_tokens=20)
    content = result.content
    return {"text": content.text if isinstance(content, types.TextContent) else None}


if __name__ == "__main__":
    server.run("stdio")
