"""The real toolhost binary for the client's tests: started on a free loopback
port with a temp plugins dir (calc, image, files from target/plugins, with
their precompiled entries) and a temp data dir; stopped at the end."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, TypeVar

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "target" / "plugins"
BINARY = Path(os.environ.get("TOOLHOST_BIN", REPO / "target" / "debug" / "toolhost"))
TOKEN = "py-client-test-token-0123456789"

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Optional[T]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout} s")


class Server:
    """One toolhost process. `health_s`: seconds from spawn to the first
    `/health` answer."""

    def __init__(self, plugins: List[str], env: Optional[Dict[str, str]] = None) -> None:
        if not BINARY.is_file():
            raise RuntimeError(f"no toolhost binary at {BINARY}: cargo build -p toolhost")
        self.root = Path(tempfile.mkdtemp(prefix="toolhost-py-client-"))
        self.plugins = self.root / "plugins"
        self.plugins.mkdir()
        for name in plugins:
            self.add_plugin(name, name)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.root / "server.log"
        child_env = {k: v for k, v in os.environ.items() if k not in ("TOOLHOST_TOKEN", "TOOLHOST_ADMIN_TOKEN")}
        child_env["TOOLHOST_LOG"] = "info"
        child_env.update(env or {})
        self.token = child_env.get("TOOLHOST_TOKEN")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(BINARY), "serve", "--bind", f"127.0.0.1:{self.port}", "--plugins", str(self.plugins),
             "--data", str(self.root / "data")],
            stdout=subprocess.DEVNULL,
            stderr=open(self.log_path, "wb"),
            env=child_env,
        )
        try:
            wait_for(self._health, 30, f"/health of toolhost at {self.url}\n{self.log()}")
            self.health_s = time.monotonic() - started
            wait_for(self._ready, 180, f"plugins ready at {self.url}\n{self.log()}")
        except BaseException:
            self.stop()
            raise

    def add_plugin(self, name: str, as_name: str) -> None:
        """Copy target/plugins/<name>.wasm (+ manifest, + its precompiled
        entry, so a fresh data dir starts warm) in as `as_name`."""
        wasm = PLUGINS / f"{name}.wasm"
        if not wasm.is_file():
            raise RuntimeError(f"plugin {name} is not built: make plugins")
        digest = hashlib.sha256(wasm.read_bytes()).hexdigest()
        cache = PLUGINS / ".compile-cache"
        if cache.is_dir():
            (self.plugins / ".compile-cache").mkdir(exist_ok=True)
            for entry in cache.glob(f"{digest}-*.cwasm"):
                shutil.copy(entry, self.plugins / ".compile-cache" / entry.name)
        toml = wasm.with_suffix(".toml")
        if toml.is_file():
            shutil.copy(toml, self.plugins / f"{as_name}.toml")
        # The manifest first: a .wasm seen without it would load with defaults.
        shutil.copy(wasm, self.plugins / f".{as_name}.wasm.tmp")
        os.replace(self.plugins / f".{as_name}.wasm.tmp", self.plugins / f"{as_name}.wasm")

    def remove_plugin(self, name: str) -> None:
        (self.plugins / f"{name}.wasm").unlink()
        toml = self.plugins / f"{name}.toml"
        if toml.exists():
            toml.unlink()

    def _headers(self) -> Dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def _health(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"toolhost exited with {self.proc.returncode}:\n{self.log()}")
        try:
            return httpx.get(self.url + "/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def _ready(self) -> bool:
        return httpx.get(self.url + "/health/ready", headers=self._headers(), timeout=5).status_code == 200

    def tool_ids(self) -> List[str]:
        body = httpx.get(self.url + "/tools", headers=self._headers(), timeout=10).json()
        return [t["tool_id"] for t in body["tools"]]

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The shared server: calc (text), image (images, progress), files."""
    s = Server(["calc", "image", "files"])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def token_server() -> Iterator[Server]:
    """A server with a caller token (TOOLHOST_TOKEN): every route but /health needs it."""
    s = Server(["calc"], env={"TOOLHOST_TOKEN": TOKEN})
    yield s
    s.stop()


@pytest.fixture
def client(server: Server) -> Iterator["object"]:
    from toolhost_client import Client

    with Client(server.url) as c:
        yield c


def png(width: int, height: int) -> bytes:
    """A real RGB PNG (gradient), made with zlib."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(((x * 7) % 256, (y * 5) % 256, 128)) for x in range(width)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def png_size(data: bytes) -> tuple:
    """(width, height) from a PNG's header; fails on anything else."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return struct.unpack(">II", data[16:24])
