"""imagecompress: seed 004's example tool service, an HTTP service in a
container (toolhost's service toolkits: the container's own process serves
HTTP; toolhost reaches it inside the container's network namespace).

GET /health answers 200 once the service is up. POST /compress takes
{"image_path": <a file of the session workspace>, "quality": 1..95} and
writes <stem>.compressed.jpg beside it, answering its size and the ratio.
"""

import io
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

WORKSPACE = os.path.realpath(os.environ.get("WORKSPACE", "/workspace"))
PORT = int(os.environ.get("PORT", "8080"))
MAX_PIXELS = 40_000_000


class Refused(Exception):
    """A bad request: answered 422 with the message."""


def workspace_file(relative):
    if not isinstance(relative, str) or not relative:
        raise Refused("image_path must be a path in the session workspace")
    path = os.path.realpath(os.path.join(WORKSPACE, relative))
    if not path.startswith(WORKSPACE + os.sep):
        raise Refused(f"image_path {relative!r} is outside the workspace")
    if not os.path.isfile(path):
        raise Refused(f"no file {relative!r} in the workspace")
    return path


def compress(request):
    path = workspace_file(request.get("image_path"))
    quality = request.get("quality", 75)
    if not isinstance(quality, int) or not 1 <= quality <= 95:
        raise Refused("quality must be an integer from 1 to 95")
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
            out = io.BytesIO()
            image.save(out, "JPEG", quality=quality, optimize=True)
    except (OSError, Image.DecompressionBombError) as e:
        raise Refused(f"{request.get('image_path')!r} is not an image Pillow can read: {e}")
    original = os.path.getsize(path)
    stem, _ = os.path.splitext(path)
    target = stem + ".compressed.jpg"
    with open(target, "wb") as f:
        f.write(out.getvalue())
    compressed = len(out.getvalue())
    return {
        "original_size": original,
        "compressed_size": compressed,
        "compression_ratio": round(original / compressed, 3) if compressed else None,
        "output_path": os.path.relpath(target, WORKSPACE),
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/compress":
                self.answer(404, {"error": "not found"})
            elif not isinstance(request, dict):
                self.answer(422, {"error": "the body must be a JSON object"})
            else:
                self.answer(200, compress(request))
        except Refused as e:
            self.answer(422, {"error": str(e)})
        except json.JSONDecodeError:
            self.answer(400, {"error": "the body is not JSON"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    print(f"imagecompress: serving on 127.0.0.1:{PORT}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
