"""Drives Stackhouse's /mcp endpoint with the official MCP Python SDK (PyPI `mcp`).

Usage: python3 mcp_client.py '<json>' where the JSON names
  url      the endpoint (http://host:port/mcp)
  headers  extra HTTP headers (Authorization, X-Scope-OrgID)
  mode     "legacy" (the initialize handshake) or "modern" (server/discover, 2026-07-28)
  calls    [{"tool": name, "arguments": {...}}, ...]

Prints one JSON object of what it observed: the negotiated protocol version, the server's
name, the tools listed (name, required, properties) and each call's isError, text and
structured content; or {"error": ...} when the connection failed; and the HTTP
statuses of every response.
"""

import asyncio
import json
import sys

try:
    import httpx2 as httpx
except ImportError:  # older SDKs use httpx
    import httpx

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
import mcp.types as types


def error_text(e: BaseException) -> str:
    """The text of an error, exception groups unwrapped."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(error_text(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


# HTTP statuses of every response, in order: the SDK reports a refusal (401) only as a
# generic error.
STATUSES: list[int] = []


async def record(response) -> None:
    STATUSES.append(response.status_code)


async def run(config: dict) -> dict:
    out: dict = {}
    client = httpx.AsyncClient(
        headers=config.get("headers", {}), timeout=60, event_hooks={"response": [record]}
    )
    async with client:
        async with streamable_http_client(config["url"], http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                if config.get("mode") == "modern":
                    result = await session.discover()
                    out["supported_versions"] = result.supported_versions
                else:
                    result = await session.initialize()
                    out["capabilities_tools"] = result.capabilities.tools is not None
                    await session.send_ping()
                out["protocol_version"] = session.protocol_version
                info = session.server_info
                out["server_name"] = info.name if info else None
                listed = await session.list_tools()
                out["tools"] = [
                    {
                        "name": t.name,
                        "required": t.input_schema.get("required", []),
                        "properties": sorted(t.input_schema.get("properties", {})),
                    }
                    for t in listed.tools
                ]
                calls = []
                for call in config.get("calls", []):
                    r: types.CallToolResult = await session.call_tool(call["tool"], call.get("arguments", {}))
                    texts = [c.text for c in r.content if isinstance(c, types.TextContent)]
                    calls.append(
                        {
                            "tool": call["tool"],
                            "is_error": bool(r.is_error),
                            "text": "\n".join(texts),
                            "structured": r.structured_content,
                        }
                    )
                out["calls"] = calls
    return out


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        out = asyncio.run(run(config))
    except BaseException as e:  # the test asserts on what failed
        out = {"error": error_text(e)}
    out["http_statuses"] = STATUSES
    print(json.dumps(out))


if __name__ == "__main__":
    main()
