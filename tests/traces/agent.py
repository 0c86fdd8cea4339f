"""An agent step as tests/e2e/tests/traces.rs makes one: a span of its own
("agent step", exported by the OpenTelemetry SDK), and inside it calls of a
wasm tool, a Docker node's tool and an API tool through toolhost's Python
client (which sends the current span as `traceparent`), a failing call, and
an MCP call through the official SDK (which sends its span in `_meta`). Prints one
JSON line: the trace and span ids the test looks for in the receiver.

    python agent.py TOOLHOST_URL OTLP_TRACES_URL API_TOOL
"""
import asyncio
import json
import sys

from mcp import Client as McpClient
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from toolhost_client import Client, ToolhostError

url, otlp, api_tool = sys.argv[1:4]
provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp)))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("agent")


def ids(span):
    c = span.get_span_context()
    return format(c.trace_id, "032x"), format(c.span_id, "016x")


async def mcp_call():
    async with McpClient(url + "/mcp", mode="legacy") as c:
        r = await c.call_tool("calc_evaluate", {"expression": "2^5"})
        return json.loads(r.content[0].text)["value"]


report = {}
with tracer.start_as_current_span("agent step") as step:
    report["trace_id"], report["step_span"] = ids(step)
    client = Client(url)
    report["calc"] = client.invoke("calc_evaluate", {"expression": "6*7"}).value["value"]
    report["shell"] = client.invoke("shell_run", {"command": "echo node"}).value["stdout"]
    report["api"] = client.invoke(api_tool, {"name": "ada"}).value["greeting"]
    try:
        client.invoke("calc_evaluate", {"expression": "1/"})
        report["failed"] = None
    except ToolhostError as e:
        report["failed"] = e.kind
    # The SDK puts its own span ("MCP send tools/call ...", a child of this
    # one) in the request's `_meta` by itself.
    with tracer.start_as_current_span("mcp call") as mcp_span:
        _, report["mcp_span"] = ids(mcp_span)
        report["mcp"] = asyncio.run(mcp_call())
provider.shutdown()
print(json.dumps(report))
