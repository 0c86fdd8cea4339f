"""A release toolhost server on a free 127.0.0.1 port for the bench scripts
(doc_anchor.py, retrieval_eval.py, scaling.py): started on a plugins and data
directory, waited for until ready, called over the native API, stopped."""

import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The doc plugin's local embedding model, where `make plugins` puts it.
MODEL = os.path.join(ROOT, "target/plugins/.models/all-minilm-l6-v2")


def doc_manifest_with_local_model():
    """target/plugins/doc.toml with its model folder made absolute (MODEL),
    for a plugins folder elsewhere."""
    manifest = open(os.path.join(ROOT, "target/plugins/doc.toml")).read()
    return manifest.replace('dir = ".models/all-minilm-l6-v2"', f'dir = "{MODEL}"')


def index_vectors(workspace):
    """The vectors doc_retrieval keeps for `workspace` (its
    .index/doc/vectors.bin: a 4-byte tag, count and dimensions as u32 LE,
    then the f32 LE vectors), as a list of tuples."""
    blob = open(os.path.join(workspace, ".index/doc/vectors.bin"), "rb").read()
    n, dims = struct.unpack_from("<II", blob, 4)
    floats = struct.unpack_from(f"<{n * dims}f", blob, 12)
    return [floats[i * dims:(i + 1) * dims] for i in range(n)]


def work_with_plugins(prefix, names):
    """A new temporary directory with a `plugins` folder holding the built
    plugins `names` (`<name>.wasm` and `<name>.toml` from target/plugins):
    (work, plugins)."""
    work = tempfile.mkdtemp(prefix=prefix)
    plugins = os.path.join(work, "plugins")
    os.makedirs(plugins)
    for name in names:
        for f in (f"{name}.wasm", f"{name}.toml"):
            shutil.copy(os.path.join(ROOT, "target/plugins", f), plugins)
    return work, plugins


# wrk's script for calc's invoke (`wrk -s`): one POST, the same body each time.
CALC_INVOKE_LUA = """wrk.method = "POST"
wrk.body = '{"params":{"expression":"1+2*3"}}'
wrk.headers["Content-Type"] = "application/json"
"""


def calc_under_wrk(prefix):
    """`work_with_plugins(prefix, ["calc"])` and wrk's script of its invoke
    written there: (work, plugins, path of the script)."""
    work, plugins = work_with_plugins(prefix, ["calc"])
    lua = os.path.join(work, "invoke.lua")
    with open(lua, "w") as f:
        f.write(CALC_INVOKE_LUA)
    return work, plugins, lua


class BenchServer:
    def __init__(self, binary, plugins, data, log=None, level="warn"):
        """`log`: a file for the server's log (at `level`); none: dropped."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [binary, "serve", "--bind", f"127.0.0.1:{port}", "--plugins", plugins, "--data", data],
            stdout=subprocess.DEVNULL,
            stderr=log or subprocess.DEVNULL,
            env={**os.environ, "TOOLHOST_LOG": level},
        )
        self.pid = self.process.pid

    def wait_ready(self):
        """Until every plugin is loaded and runs its optimised build: a
        server serves a plugin its compile cache lacks on Winch's quick build
        first and compiles Cranelift's behind it (docs/plugins.md); a bench
        measures the build that is kept, with no compile beside it."""
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{self.base}/health/ready", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/plugins", timeout=5) as r:
                    plugins = json.load(r).get("plugins", [])
            except Exception:
                return  # GET /plugins kept from an anonymous caller: not known
            if not any(p.get("source") == "winch" for p in plugins):
                return
            time.sleep(0.05)
        raise RuntimeError("plugins still run their quick build after 10 minutes")

    def answer(self, tool, params, session, timeout=600):
        """The whole answer to calling `tool` with `params` in `session`."""
        req = urllib.request.Request(
            f"{self.base}/tools/{tool}/invoke",
            data=json.dumps({"params": params}).encode(),
            headers={"content-type": "application/json", "x-toolhost-session": session},
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

    def invoke(self, tool, params, session, timeout=600):
        """The `result` of calling `tool` with `params` in `session`."""
        return self.answer(tool, params, session, timeout)["result"]

    def stop(self, patience=None):
        """Terminate it; killed when it has not ended within `patience` s."""
        self.process.terminate()
        try:
            self.process.wait(patience)
        except subprocess.TimeoutExpired:
            self.process.kill()
