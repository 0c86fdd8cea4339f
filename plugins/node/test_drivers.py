#!/usr/bin/env python3
"""Driver-level tests of the toolhost node drivers against the real image.

    python3 plugins/node/test_drivers.py [shell|notebook|browser|users ...]

Needs a running Docker engine and the image toolhost-node:latest
(plugins/node/ensure-docker.sh, plugins/node/build-image.sh). Each driver runs in
its own container exactly as the host runs it (driver bind-mounted at
/opt/toolhost/driver.py, `python3 -u`, stdin/stdout = the protocol). Containers
get no network, except the browser's (--network host: it loads pages from an
http.server on 127.0.0.1 in this process). Prints one line per check, a few
timings, and finally "N passed, M failed"; exits non-zero on any failure.
"""
import base64
import http.server
import json
import os
import queue
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.environ.get("TOOLHOST_NODE_IMAGE", "toolhost-node:latest")
PASSED, FAILED = [], []
TIMINGS = []
_seq = 0


def check(name, cond, detail=""):
    (PASSED if cond else FAILED).append(name)
    print(f"{'PASS' if cond else 'FAIL'}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
    return cond


def timing(name, seconds):
    TIMINGS.append((name, seconds))
    print(f"TIME  {name}: {seconds * 1000:.1f} ms", flush=True)


def section(title, fn, *args):
    """Run one group of checks; an exception fails the group, not the run."""
    print(f"\n== {title}", flush=True)
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - report and go on with the next group
        check(f"{title}: no unexpected exception", False, f"{type(e).__name__}: {e}")


class Driver:
    """A driver in a fresh container, spoken to over its stdin/stdout."""

    def __init__(self, kind, user=None, network="none", memory="512m", pids=256, env=None):
        global _seq
        _seq += 1
        self.kind = kind
        self.name = f"toolhost-test-{kind}-{os.getpid()}-{_seq}"
        self.workspace = tempfile.mkdtemp(prefix=f"toolhost-test-{kind}-")
        os.chmod(self.workspace, 0o777)
        self.stderr_path = os.path.join(tempfile.gettempdir(), self.name + ".stderr")
        cmd = ["docker", "run", "-i", "--rm", "--init", "--name", self.name,
               "--network", network, "--memory", memory, "--cpus", "1", "--pids-limit", str(pids),
               "--label", "toolhost.test=1",
               "-v", f"{REPO}/plugins/{kind}/driver.py:/opt/toolhost/driver.py:ro",
               "-v", f"{self.workspace}:/workspace"]
        if user:
            cmd += ["--user", user]
        for k, v in (env or {}).items():
            cmd += ["-e", f"{k}={v}"]
        cmd += [IMAGE, "python3", "-u", "/opt/toolhost/driver.py"]
        self.lines = queue.Queue()
        self.next_id = 0
        t0 = time.monotonic()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        threading.Thread(target=self._reader, daemon=True).start()
        self.ready = self.read(120)
        self.ready_s = time.monotonic() - t0

    def _reader(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no line from the {self.kind} driver within {timeout} s") from None
        if line is None:
            raise EOFError(f"the {self.kind} driver exited; stderr: {self.stderr_tail()}")
        return json.loads(line)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def call(self, op, timeout=None, **args):
        """Send one request and return the whole response object."""
        self.next_id += 1
        rid = self.next_id
        self.send_raw(json.dumps({"id": rid, "op": op, **args}).encode() + b"\n")
        resp = self.read(timeout or (args.get("timeout_s", 30) + 30))
        if resp.get("id") != rid:
            raise AssertionError(f"response id {resp.get('id')} for request {rid}")
        return resp

    def ok(self, op, **args):
        """call() that expects success and returns the result."""
        resp = self.call(op, **args)
        if not resp.get("ok"):
            raise AssertionError(f"{op} failed: {resp.get('error')}")
        return resp["result"]

    def stderr_tail(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-1500:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001
            pass
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)
        if self.proc.poll() is None:
            self.proc.kill()
        shutil.rmtree(self.workspace, ignore_errors=True)
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass
        return self.proc.returncode


def png_size(data):
    """(width, height) of PNG bytes, or None if they are not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def protocol_checks(d, prefix):
    check(f"{prefix}: ready line", d.ready == {"ready": True, "driver": d.kind, "protocol": 1}, str(d.ready))
    check(f"{prefix}: ping", d.ok("ping") == {"pong": True})
    d.send_raw(b"this is not json\n")
    r = d.read(10)
    check(f"{prefix}: garbage line -> id null invalid_input",
          r.get("id") is None and r.get("error", {}).get("kind") == "invalid_input", str(r))
    r = d.call("no_such_op")
    check(f"{prefix}: unknown op -> invalid_input", r.get("error", {}).get("kind") == "invalid_input", str(r))


# ---- shell ---------------------------------------------------------------------

def test_shell():
    d = Driver("shell")
    try:
        timing("shell: container start to ready", d.ready_s)
        protocol_checks(d, "shell")
        r = d.call("run")
        check("shell: run without command -> invalid_input", r["error"]["kind"] == "invalid_input", str(r))

        trace = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        r = d.call("run", command="sleep 0.2; echo traced", trace=trace)
        steps = {s["name"]: s for s in r.get("steps", [])}
        check("shell: a traced request answers with its steps (the op, waiting for output)",
              r["ok"] and r["result"]["stdout"] == "traced\n" and {"run", "shell.wait_output"} <= set(steps)
              and steps["run"]["end_ns"] - steps["run"]["start_ns"] >= 200_000_000
              and steps["run"]["start_ns"] <= steps["shell.wait_output"]["start_ns"], str(r)[:400])
        r = d.call("run", command="true")
        check("shell: an untraced request has no steps", r["ok"] and "steps" not in r, str(r)[:200])
        r = d.call("run", trace=trace)
        check("shell: a traced request that fails still says its steps",
              r["error"]["kind"] == "invalid_input" and [s["name"] for s in r["steps"]] == ["run"], str(r)[:300])
        r = d.ok("run", command="echo out; echo err >&2; exit_code_test() { return 3; }; exit_code_test")
        check("shell: stdout, stderr, exit code",
              (r["stdout"], r["stderr"], r["exit_code"], r["finished"]) == ("out\n", "err\n", 3, True), str(r))
        d.ok("run", command="cd /tmp && export TOOLHOST_X=hello && mkdir -p sub")
        r = d.ok("run", command="pwd; echo $TOOLHOST_X")
        check("shell: cwd and env persist", r["stdout"] == "/tmp\nhello\n", str(r))
        d.ok("run", command="cd /workspace")
        r = d.ok("run", command="if then fi")
        check("shell: syntax error is a non-zero exit code", r["exit_code"] not in (0, None) and r["finished"], str(r))
        r = d.ok("run", command="echo ok")
        check("shell: still works after the syntax error", r["stdout"] == "ok\n", str(r))
        r = d.ok("run", command="echo 'it'\"'\"'s a \"__sentinel__\" {' ; printf '%s\\n' '__toolhost_0:0' \"}\"")
        check("shell: quotes, braces and sentinel-like text",
              r["stdout"] == "it's a \"__sentinel__\" {\n__toolhost_0:0\n}\n" and r["exit_code"] == 0, str(r))
        r = d.ok("run", command="echo 'unbalanced")
        check("shell: unbalanced quote is an error, not a hang", r["finished"] and r["exit_code"] != 0, str(r))
        r = d.ok("run", command="printf 'no newline'")
        check("shell: output without trailing newline", r["stdout"] == "no newline", str(r))
        r = d.ok("run", command="read -t 1 line; echo \"rc=$?\"")
        check("shell: commands cannot read the driver's stdin", r["stdout"].startswith("rc=1"), str(r))

        r = d.ok("run", command="echo start; sleep 2; echo end", timeout_s=0.5)
        # (a trailing newline may be held back until it is known not to start the sentinel)
        check("shell: long command returns finished=false",
              not r["finished"] and r["exit_code"] is None and r["stdout"].rstrip("\n") == "start", str(r))
        first = r["stdout"]
        r2 = d.call("run", command="true")
        check("shell: run while a command runs -> invalid_input",
              r2.get("error", {}).get("kind") == "invalid_input", str(r2))
        r = d.ok("read_output", timeout_s=10)
        check("shell: read_output completes it",
              r["finished"] and r["exit_code"] == 0 and first + r["stdout"] == "start\nend\n",
              str(r))
        r = d.ok("read_output", timeout_s=1)
        check("shell: read_output when idle", r["finished"] and r["stdout"] == "" and r["exit_code"] == 0, str(r))

        r = d.ok("run", command="sleep 100", timeout_s=0.5)
        t0 = time.monotonic()
        k = d.ok("kill")
        kill_s = time.monotonic() - t0
        check("shell: kill of sleep 100", k["killed"] and k["finished"] and k["exit_code"] not in (0, None),
              f"{k}, {kill_s:.2f} s")
        r = d.ok("run", command="ps -eo comm | grep -c '^sleep$' || true")
        check("shell: no sleep left after kill", r["stdout"].strip() == "0", str(r))
        r = d.ok("run", command="bash -c \"trap '' INT; sleep 100\"", timeout_s=0.5)
        t0 = time.monotonic()
        k = d.ok("kill")
        check("shell: kill of a command ignoring SIGINT (SIGKILL follows)",
              k["killed"] and k["finished"] and time.monotonic() - t0 < 5, f"{k}, {time.monotonic() - t0:.2f} s")
        r = d.ok("run", command="(sleep 300 &) ; sleep 301 & echo bg")
        k = d.ok("kill")
        r = d.ok("run", command="ps -eo comm | grep -c '^sleep$' || true")
        check("shell: kill also stops background and orphaned jobs", k["killed"] and r["stdout"].strip() == "0",
              f"{k} / {r}")

        t0 = time.monotonic()
        r = d.ok("run", command="head -c 50000000 /dev/zero | tr '\\0' x; echo; echo tail-marker; "
                                "head -c 3000000 /dev/zero | tr '\\0' y >&2", timeout_s=120)
        big_s = time.monotonic() - t0
        check("shell: 50 MB of output is truncated",
              r["truncated"] and r["finished"] and r["exit_code"] == 0 and len(r["stdout"]) < 1_500_000
              and r["stdout"].startswith("xxxx") and r["stdout"].endswith("tail-marker\n")
              and "bytes of output dropped" in r["stdout"] and len(r["stderr"]) < 1_500_000,
              f"stdout {len(r['stdout'])} chars, stderr {len(r['stderr'])} chars, {big_s:.1f} s")
        t0 = time.monotonic()
        r = d.ok("run", command="echo fine")
        check("shell: answers fast after the flood", r["stdout"] == "fine\n" and time.monotonic() - t0 < 1.0)

        d.ok("run", command="echo from-container > /workspace/hello.txt")
        with open(os.path.join(d.workspace, "hello.txt")) as f:
            check("shell: file in /workspace visible on the host", f.read() == "from-container\n")

        r = d.ok("run", command="exit 7")
        check("shell: exit restarts the shell",
              r.get("restarted") is True and "state" in r.get("note", "") and r["exit_code"] == 7, str(r))
        r = d.ok("run", command="pwd")
        check("shell: new shell works, starts in /workspace", r["stdout"] == "/workspace\n", str(r))
        r = d.ok("run", command="exec >/dev/null; echo hidden", timeout_s=1)
        k = d.ok("kill")
        r = d.ok("run", command="echo back")
        check("shell: a shell whose stdout was redirected away is replaced by kill",
              k.get("restarted") is True and r["stdout"] == "back\n", f"{k} / {r}")

        times = []
        for _ in range(50):
            t0 = time.monotonic()
            d.ok("run", command="true")
            times.append(time.monotonic() - t0)
        timing("shell: run `true` round trip (median of 50)", statistics.median(times))
    finally:
        check("shell: driver exits 0 on EOF", d.close() == 0)


def test_shell_fork_bomb():
    d = Driver("shell", pids=64)
    try:
        r = d.ok("run", command=":(){ :|:& };:", timeout_s=5)
        time.sleep(2)
        t0 = time.monotonic()
        k = d.ok("kill", timeout=60)
        check("shell: fork bomb under --pids-limit 64 is killed", k["killed"], f"{time.monotonic() - t0:.1f} s")
        r = d.ok("run", command="echo survived; ps -e --no-headers | wc -l")
        lines = r["stdout"].split()
        check("shell: works after the fork bomb", lines[:1] == ["survived"] and int(lines[1]) < 10, str(r))
    finally:
        d.close()


def test_shell_rm_rf():
    canary_dir = tempfile.mkdtemp(prefix="toolhost-canary-")
    canary = os.path.join(canary_dir, "canary.txt")
    with open(canary, "w") as f:
        f.write("still here\n")
    d = Driver("shell")
    try:
        r = d.call("run", command="rm -rf / --no-preserve-root 2>/dev/null; echo done", timeout_s=120)
        check("shell: rm -rf / answered", r.get("ok") or r.get("error", {}).get("kind") == "failed", str(r)[:300])
        check("shell: host untouched (canary file, driver source, workspace dir)",
              os.path.exists(canary) and os.path.exists(f"{REPO}/plugins/shell/driver.py")
              and os.path.isdir(d.workspace))
        p = d.call("ping")
        r = d.call("run", command="echo still")
        works = r.get("ok") and r["result"]["stdout"] == "still\n"
        clear = not r.get("ok") and r["error"]["kind"] == "failed" and r["error"]["message"]
        check("shell: after rm -rf / the driver still works or reports clearly",
              p.get("ok") and (works or clear), f"{'works' if works else r}")
    finally:
        d.close()
        shutil.rmtree(canary_dir, ignore_errors=True)


# ---- notebook --------------------------------------------------------------------

def test_notebook():
    d = Driver("notebook", memory="1g")
    try:
        timing("notebook: container start to ready", d.ready_s)
        protocol_checks(d, "notebook")
        r = d.call("execute", code="x = 41\nprint('hello')",
                   trace={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        check("notebook: a traced request answers with the kernel's step",
              r["ok"] and {"execute", "kernel.execute"} <= {s["name"] for s in r.get("steps", [])}, str(r)[:400])
        r = r["result"]
        check("notebook: stdout", r["stdout"] == "hello\n" and r["result"] is None and r["error"] is None, str(r))
        r = d.ok("execute", code="x + 1")
        check("notebook: state survives, result", r["result"] == "42" and isinstance(r["execution_count"], int),
              str(r))
        r = d.ok("execute", code="import sys; print('e', file=sys.stderr); import os; os.getcwd()")
        check("notebook: stderr and cwd /workspace", r["stderr"] == "e\n" and r["result"] == "'/workspace'", str(r))
        r = d.ok("execute", code="def f():\n    return 1/0\nf()")
        e = r["error"] or {}
        check("notebook: error with traceback",
              e.get("ename") == "ZeroDivisionError" and len(e.get("traceback", [])) > 1
              and not any("\x1b" in line for line in e["traceback"]), str(e)[:300])
        r = d.ok("execute", code="import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()")
        sizes = [png_size(base64.b64decode(i["data"])) for i in r["images"]]
        check("notebook: plt.show() gives a PNG", len(sizes) == 1 and sizes[0] and sizes[0][0] > 100, str(sizes))
        r = d.ok("execute", code="fig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\nfig")
        check("notebook: figure as last expression gives one PNG",
              len(r["images"]) == 1 and png_size(base64.b64decode(r["images"][0]["data"])), str(len(r["images"])))
        r = d.ok("execute", code="print('x' * 3_000_000)")
        check("notebook: big output is capped", r["truncated"] and len(r["stdout"]) < 1_500_000, str(len(r["stdout"])))
        t0 = time.monotonic()
        r = d.ok("execute", code="while True: pass", timeout_s=2)
        check("notebook: endless loop interrupted after timeout_s", r["timed_out"] and time.monotonic() - t0 < 9,
              f"{time.monotonic() - t0:.1f} s, error {(r['error'] or {}).get('ename')}")
        r = d.ok("execute", code="x")
        check("notebook: state survives the interrupt", r["result"] == "41", str(r))
        # A failed or interrupted cell does not make the kernel abort the next
        # one, however soon it comes.
        answers = []
        for i in range(16):
            if i % 2:
                d.ok("execute", code="1/0")
            else:
                d.ok("execute", code="while True: pass", timeout_s=0.3)
            answers.append(d.ok("execute", code="x")["result"])
        check("notebook: the cell right after an error or interrupt runs", answers == ["41"] * 16,
              str(answers))
        t0 = time.monotonic()
        r = d.ok("execute", code="import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "while True: time.sleep(0.01)", timeout_s=1)
        check("notebook: code ignoring the interrupt -> kernel restarted, said so",
              r["timed_out"] and r.get("restarted") is True and "state" in r.get("note", "")
              and time.monotonic() - t0 < 20, f"{r.get('note')}, {time.monotonic() - t0:.1f} s")
        r = d.ok("execute", code="x = 41\nx")
        check("notebook: works after that restart", r["result"] == "41", str(r)[:200])
        r = d.call("execute", code="import os; os._exit(1)")
        check("notebook: kernel death -> failed, restarted",
              r.get("error", {}).get("kind") == "failed" and "died" in r["error"]["message"], str(r))
        r = d.ok("execute", code="'x' in dir()")
        check("notebook: new kernel works after the death", r["result"] == "False", str(r))
        d.ok("execute", code="y = 1")
        check("notebook: restart", d.ok("restart") == {"restarted": True})
        r = d.ok("execute", code="y")
        check("notebook: restart clears state", (r["error"] or {}).get("ename") == "NameError", str(r)[:200])
        r = d.call("execute", code="1", timeout_s=-1)
        check("notebook: bad timeout -> invalid_input", r.get("error", {}).get("kind") == "invalid_input", str(r))
        times = []
        for _ in range(20):
            t0 = time.monotonic()
            d.ok("execute", code="1+1")
            times.append(time.monotonic() - t0)
        timing("notebook: execute `1+1` (median of 20)", statistics.median(times))
    finally:
        check("notebook: driver exits 0 on EOF", d.close() == 0)


# ---- browser -----------------------------------------------------------------------

PAGE = """<!doctype html><html><head><title>Toolhost Test Page</title>
<style>body { font-family: sans-serif }</style><script>var noise = "SCRIPT-NOISE";</script></head>
<body><nav><a href="/nav.html">NAV-NOISE</a></nav>
<h1>Main Heading</h1>
<p>First paragraph with a <a href="/other.html">relative link</a>.</p>
<h2>List</h2><ul><li>alpha</li><li>beta <b>bold</b></li></ul>
<p>Second paragraph.</p><div style="height: 3000px"></div><p>bottom</p>
</body></html>"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_pages():
    root = tempfile.mkdtemp(prefix="toolhost-pages-")
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write(PAGE)
    pages = {
        "other.html": "<title>Other</title><p>other page</p>",
        "alert.html": "<title>Alert</title><script>alert('hi'); confirm('sure?')</script><p>after alert</p>",
        "hang.html": "<title>Hang</title><p>before</p><script>while (true) {}</script>",
    }
    for name, html in pages.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(html)

    def handler(*args, **kw):
        return QuietHandler(*args, directory=root, **kw)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, root


def test_browser():
    server, root = serve_pages()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    d = Driver("browser", network="host", memory="1g", pids=512)
    try:
        timing("browser: container start to ready", d.ready_s)
        protocol_checks(d, "browser")
        r = d.call("screenshot")
        check("browser: screenshot before any page -> invalid_input",
              r.get("error", {}).get("kind") == "invalid_input", str(r))
        t0 = time.monotonic()
        r = d.ok("open", url=base + "/index.html")
        timing("browser: first open (starts Chromium if lazy)", time.monotonic() - t0)
        text = r["text"]
        check("browser: title, url, status",
              r["title"] == "Toolhost Test Page" and r["url"] == base + "/index.html" and r["status"] == 200,
              f"{r['title']!r} {r['url']} {r['status']}")
        check("browser: markdown heading, paragraph, list",
              "# Main Heading" in text and "## List" in text and "- alpha" in text and "Second paragraph." in text,
              repr(text[:300]))
        check("browser: markdown link is absolute", f"[relative link]({base}/other.html)" in text, repr(text[:300]))
        check("browser: script and nav noise dropped", "SCRIPT-NOISE" not in text and "NAV-NOISE" not in text)
        check("browser: links list", {"text": "relative link", "href": f"{base}/other.html"} in r["links"],
              str(r["links"]))
        r = d.ok("open", url=base + "/index.html", max_chars=20)
        check("browser: max_chars", r["text"].startswith("# Main Heading") and len(r["text"]) < 200, repr(r["text"]))
        r = d.ok("open", url="data:text/html,<title>D</title><h3>data url</h3>")
        check("browser: data: URL", r["title"] == "D" and "### data url" in r["text"], str(r)[:200])

        r = d.ok("screenshot", url=base + "/index.html")
        size = png_size(base64.b64decode(r["data"]))
        check("browser: screenshot is a 1280x800 PNG",
              r["media_type"] == "image/png" and size == (1280, 800) and (r["width"], r["height"]) == size, str(size))
        r = d.ok("screenshot", full_page=True)
        size = png_size(base64.b64decode(r["data"]))
        check("browser: full-page screenshot of the current page", size and size[1] > 3000, str(size))

        r = d.call("open", url="http://127.0.0.1:9/")
        check("browser: http://127.0.0.1:9/ -> failed with the net error",
              r.get("error", {}).get("kind") == "failed" and "net::ERR_" in r["error"]["message"], str(r))
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            closed_port = s.getsockname()[1]
        r = d.call("open", url=f"http://127.0.0.1:{closed_port}/")
        check("browser: connection refused -> failed",
              r.get("error", {}).get("kind") == "failed" and "ERR_CONNECTION_REFUSED" in r["error"]["message"],
              str(r))
        for bad in ("javascript:alert(1)", "ftp://example.com/", "chrome://settings", "not a url"):
            r = d.call("open", url=bad)
            check(f"browser: {bad!r} -> invalid_input", r.get("error", {}).get("kind") == "invalid_input", str(r))
        r = d.call("open", url="http://does-not-exist.invalid/")
        check("browser: DNS failure -> failed", r.get("error", {}).get("kind") == "failed"
              and "ERR_NAME_NOT_RESOLVED" in r["error"]["message"], str(r))

        r = d.call("open", url=base + "/missing.html")
        check("browser: HTTP 404 is a page with status 404", r.get("ok") and r["result"]["status"] == 404, str(r)[:200])
        r = d.ok("open", url=base + "/alert.html")
        check("browser: alert() dialogs do not block", r["title"] == "Alert" and "after alert" in r["text"],
              str(r)[:200])
        t0 = time.monotonic()
        r = d.call("open", url=base + "/hang.html", timeout_s=3)
        check("browser: a page stuck in a script times out",
              r.get("error", {}).get("kind") == "failed" and "timed out" in r["error"]["message"]
              and time.monotonic() - t0 < 15, f"{r}, {time.monotonic() - t0:.1f} s")
        r = d.ok("open", url=base + "/index.html")
        check("browser: works after the stuck page", r["title"] == "Toolhost Test Page", str(r)[:200])

        subprocess.run(["docker", "exec", d.name, "pkill", "-KILL", "-f", "type=renderer"], capture_output=True)
        time.sleep(0.5)
        r = d.ok("open", url=base + "/index.html")
        check("browser: replaces a crashed tab", r.get("restarted") is True and r["title"] == "Toolhost Test Page",
              str(r)[:200])
        subprocess.run(["docker", "exec", d.name, "pkill", "-KILL", "-x", "chromium"], capture_output=True)
        time.sleep(0.5)
        r = d.ok("open", url=base + "/other.html")
        check("browser: restarts a crashed Chromium", r.get("restarted") is True and r["title"] == "Other",
              str(r)[:200])

        times = []
        for _ in range(5):
            t0 = time.monotonic()
            d.ok("open", url=base + "/index.html")
            times.append(time.monotonic() - t0)
        timing("browser: open a local page (median of 5)", statistics.median(times))
    finally:
        check("browser: driver exits 0 on EOF", d.close() == 0)
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)


# ---- as uid 1000 ---------------------------------------------------------------------

def test_users():
    for kind in ("shell", "notebook", "browser"):
        for env in ({"HOME": "/nonexistent"}, {}):
            label = f"{kind} as --user 1000:1000" + (", HOME=/nonexistent" if env else ", default HOME")
            kw = {"network": "host", "memory": "1g", "pids": 512} if kind == "browser" else {"memory": "1g"}
            d = Driver(kind, user="1000:1000", env=env, **kw)
            try:
                if kind == "shell":
                    r = d.ok("run", command="id -u; echo x > /workspace/f; cat /workspace/f; cd /tmp; pwd")
                    good = r["stdout"] == "1000\nx\n/tmp\n"
                elif kind == "notebook":
                    r = d.ok("execute",
                             code="import os, matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nos.getuid()")
                    good = r["result"] == "1000" and len(r["images"]) == 1 and r["error"] is None
                else:
                    r = d.ok("open", url="data:text/html,<title>U</title><h1>uid</h1>")
                    good = r["title"] == "U"
                check(label, good, str(r)[:200] if not good else f"ready in {d.ready_s:.1f} s")
            except Exception as e:  # noqa: BLE001
                check(label, False, f"{e}; stderr: {d.stderr_tail()[-300:]}")
            finally:
                d.close()


def main():
    wanted = set(sys.argv[1:]) or {"shell", "notebook", "browser", "users"}
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        print(f"image {IMAGE} not found: run plugins/node/build-image.sh first")
        print("0 passed, 1 failed")
        return 1
    if "shell" in wanted:
        section("shell driver", test_shell)
        section("shell driver: fork bomb", test_shell_fork_bomb)
        section("shell driver: rm -rf /", test_shell_rm_rf)
    if "notebook" in wanted:
        section("notebook driver", test_notebook)
    if "browser" in wanted:
        section("browser driver", test_browser)
    if "users" in wanted:
        section("drivers as uid 1000", test_users)
    print("\n== timings")
    for name, seconds in TIMINGS:
        print(f"  {name}: {seconds * 1000:.1f} ms")
    print(f"\n{len(PASSED)} passed, {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
