"""A traced upstream for tests/e2e/tests/traces.rs: an HTTP API (its OpenAPI
spec at /openapi.json, one operation `greet`) that joins the caller's trace
through `traceparent` with the OpenTelemetry SDK and exports its own span to
the OTLP receiver given.

    python upstream.py http://127.0.0.1:6006/v1/traces   # prints its port
"""
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "traced upstream", "version": "1"},
    "paths": {
        "/greet": {
            "get": {
                "operationId": "greet",
                "summary": "Greet someone",
                "parameters": [{"name": "name", "in": "query", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "the greeting"}},
            }
        }
    },
}

provider = TracerProvider(resource=Resource.create({"service.name": "traced-upstream"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[1])))
tracer = provider.get_tracer("upstream")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/openapi.json":
            return self.answer(SPEC)
        parent = TraceContextTextMapPropagator().extract(dict(self.headers.items()))
        with tracer.start_as_current_span("GET /greet", context=parent, kind=trace.SpanKind.SERVER) as span:
            name = urllib.parse.parse_qs(url.query).get("name", ["?"])[0]
            span.set_attribute("greeted", name)
            self.answer({"greeting": f"hello {name}", "traceparent": self.headers.get("traceparent")})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
