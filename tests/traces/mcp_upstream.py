"""A traced MCP server for tests/e2e/tests/traces.rs: the official MCP Python
SDK's `MCPServer` over streamable HTTP, which reads the trace context in a
request's `_meta` and makes its own spans under it; they go to the OTLP
receiver given through the OpenTelemetry SDK. Its tool `hello` answers the
`traceparent` its request carried.

    python mcp_upstream.py http://127.0.0.1:4318/v1/traces   # prints its port
"""
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "traced-mcp-server"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[1])))
trace.set_tracer_provider(provider)

server = MCPServer("traced")


@server.tool()
def hello(name: str, ctx: Context) -> dict:
    """Greet `name`; says the traceparent the request carried."""
    meta = ctx.request_context.meta or {}
    if not isinstance(meta, dict):
        meta = meta.model_dump() if hasattr(meta, "model_dump") else dict(meta)
    return {"greeting": f"hello {name}", "traceparent": meta.get("traceparent")}


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
port = sock.getsockname()[1]
sock.close()
print(port, flush=True)
uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")
