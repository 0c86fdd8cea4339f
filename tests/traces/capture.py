"""An OTLP/HTTP (protobuf) receiver that keeps what it is sent, decoded with
OpenTelemetry's own protocol definitions (`opentelemetry-proto`): for what
Phoenix does not keep yet, span links. GET /spans answers every span as
JSON (ids in hex, links with their attributes).

    python capture.py        # prints its port
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with LOCK:
            for resource in request.resource_spans:
                service = attributes(resource.resource.attributes).get("service.name")
                for scope in resource.scope_spans:
                    for s in scope.spans:
                        SPANS.append({
                            "service": service,
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_id": s.parent_span_id.hex() or None,
                            "attributes": attributes(s.attributes),
                            "links": [
                                {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex(),
                                 "attributes": attributes(l.attributes)}
                                for l in s.links
                            ],
                        })
        data = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with LOCK:
            data = json.dumps(SPANS).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
