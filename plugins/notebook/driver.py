#!/usr/bin/env python3
"""toolhost notebook driver: one IPython kernel, driven over a line-JSON protocol.

Runs inside a toolhost node container as `python3 -u /opt/toolhost/driver.py`,
stdin/stdout attached by `docker exec -i`. Protocol (version 1), one JSON object
per line each way:

    <- {"ready": true, "driver": "notebook", "protocol": 1}
    -> {"id": 1, "op": "execute", "code": "1+1", "timeout_s": 30}
    <- {"id": 1, "ok": true, "result": {...}}
    <- {"id": 1, "ok": false, "error": {"kind": "invalid_input" | "failed", "message": "..."}}

Ops: ping, execute {code, timeout_s?}, restart {}.

The kernel (ipykernel, via jupyter_client over ipc sockets in a private temp dir)
is started before the ready line, with cwd /workspace and the inline matplotlib
backend, so figures come back as image/png. All Jupyter state (connection file,
runtime dir, IPYTHONDIR) lives in that temp dir: HOME may be unwritable.
stdout carries only protocol lines; logs and the kernel's own stderr go to stderr.
"""
import contextlib
import functools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TMP = tempfile.mkdtemp(prefix="toolhost-nb-")
# Before importing jupyter_client: keep every Jupyter/IPython path out of HOME.
os.environ.update(
    JUPYTER_RUNTIME_DIR=os.path.join(TMP, "runtime"), JUPYTER_DATA_DIR=os.path.join(TMP, "data"),
    JUPYTER_CONFIG_DIR=os.path.join(TMP, "config"), IPYTHONDIR=os.path.join(TMP, "ipython"),
    JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")

from jupyter_client import KernelManager  # noqa: E402

DRIVER = "notebook"
PROTOCOL = 1
MAX_TIMEOUT_S = 600
STREAM_HEAD = 1 << 20  # characters kept per stream: the first 1 Mi ...
STREAM_TAIL = 256 << 10  # ... and the last 256 Ki
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 8 << 20  # total base64 size of the images of one execution
INTERRUPT_WAIT_S = 5.0
DEFAULT_REPR = re.compile(r"^<[\w.]+ object(?: at 0x[0-9a-f]+)?>$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
KERNEL_ARGS = [
    "--matplotlib=inline",  # figures -> image/png display_data
    "--HistoryManager.enabled=False",  # no sqlite history file
    "--InteractiveShell.colors=NoColor",
]


class InvalidInput(Exception):
    """The caller's fault: bad arguments, unknown op."""


class Failed(Exception):
    """The tool failed."""


def log(*parts):
    print("notebook-driver:", *parts, file=sys.stderr, flush=True)


class CappedText:
    """Text of one stream: head and tail kept, the middle dropped with a marker."""

    def __init__(self):
        self.head, self.tail, self.dropped = [], [], 0
        self.head_len = self.tail_len = 0

    def add(self, text):
        room = STREAM_HEAD - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(self.head[-1])
            text = text[room:]
        if text:
            self.tail.append(text)
            self.tail_len += len(text)
            if self.tail_len > 2 * STREAM_TAIL:
                joined = "".join(self.tail)
                self.dropped += len(joined) - STREAM_TAIL
                self.tail, self.tail_len = [joined[-STREAM_TAIL:]], STREAM_TAIL

    def value(self):
        tail = "".join(self.tail)
        dropped = self.dropped + max(0, len(tail) - STREAM_TAIL)
        text = "".join(self.head)
        if dropped:
            text += f"\n[... toolhost: {dropped} characters of output dropped ...]\n"
        return text + tail[-STREAM_TAIL:] if tail else text

    @property
    def truncated(self):
        return self.dropped > 0 or self.tail_len > STREAM_TAIL


class Collector:
    """Everything one execution produced, from its iopub messages."""

    def __init__(self):
        self.stdout, self.stderr = CappedText(), CappedText()
        self.result = None
        self.images, self.image_bytes, self.images_dropped = [], 0, 0
        self.error = None
        self.execution_count = None

    def add_image(self, data):
        data = data.replace("\n", "") if isinstance(data, str) else ""
        if not data or any(i["data"] == data for i in self.images):
            return  # a figure both returned and shown by the inline backend: keep one
        if len(self.images) >= MAX_IMAGES or self.image_bytes + len(data) > MAX_IMAGE_BYTES:
            self.images_dropped += 1
            return
        self.images.append({"media_type": "image/png", "data": data})
        self.image_bytes += len(data)

    def handle(self, msg_type, content):
        if msg_type == "stream":
            (self.stderr if content.get("name") == "stderr" else self.stdout).add(content.get("text", ""))
        elif msg_type == "execute_input":
            self.execution_count = content.get("execution_count")
        elif msg_type in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                self.add_image(data["image/png"])
            elif msg_type == "display_data" and "text/plain" in data \
                    and not DEFAULT_REPR.match(str(data["text/plain"])):  # e.g. display(HTML(...))
                self.stdout.add(str(data["text/plain"]) + "\n")
            if msg_type == "execute_result":
                self.execution_count = content.get("execution_count", self.execution_count)
                if "text/plain" in data:
                    self.result = str(data["text/plain"])
        elif msg_type == "error":
            self.error = {
                "ename": str(content.get("ename", "")), "evalue": str(content.get("evalue", "")),
                "traceback": [ANSI.sub("", str(line)) for line in content.get("traceback", [])],
            }

    def to_result(self, timed_out):
        if self.images_dropped:
            self.stderr.add(f"\n[toolhost: {self.images_dropped} more image(s) dropped: "
                            f"at most {MAX_IMAGES} images / {MAX_IMAGE_BYTES >> 20} MiB per call]\n")
        return {
            "stdout": self.stdout.value(), "stderr": self.stderr.value(), "result": self.result,
            "images": self.images, "error": self.error, "execution_count": self.execution_count,
            "timed_out": timed_out,
        }


class Notebook:
    def __init__(self):
        self.cwd = "/workspace" if os.path.isdir("/workspace") else os.getcwd()
        self.km = self.kc = None
        self.generation = 0
        self.start()

    def start(self):
        self.generation += 1
        env = dict(os.environ, MPLBACKEND="module://matplotlib_inline.backend_inline",
                   PYTHONUNBUFFERED="1")
        km = KernelManager(kernel_name="python3", transport="ipc",
                           connection_file=os.path.join(TMP, f"kernel-{self.generation}.json"))
        try:
            # The kernel must never touch the protocol streams: stdin/stdout closed,
            # its stderr (crash reports) joins ours.
            km.start_kernel(extra_arguments=KERNEL_ARGS, cwd=self.cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sys.stderr)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=60)
        except Exception as e:
            try:
                km.shutdown_kernel(now=True)
            except Exception:
                pass
            raise Failed(f"cannot start the Python kernel: {e}") from e
        self.km, self.kc = km, kc

    def stop(self):
        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception as e:
                log(f"stop_channels: {e!r}")
        if self.km is not None:
            try:
                self.km.shutdown_kernel(now=True)
            except Exception as e:
                log(f"shutdown_kernel: {e!r}")
        self.km = self.kc = None

    def restart(self):
        self.stop()
        self.start()

    def alive(self):
        try:
            return self.km is not None and self.km.is_alive()
        except Exception:
            return False

    def wait_idle(self, msg_id, deadline, col):
        """Collect iopub messages of `msg_id` until the kernel is idle again.
        Returns "idle", "timeout" or "died"."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                msg = self.kc.get_iopub_msg(timeout=min(remaining, 0.25))
            except queue.Empty:
                if not self.alive():
                    return "died"
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # left over from an earlier (interrupted) execution
            content = msg.get("content", {})
            if msg["msg_type"] == "status":
                if content.get("execution_state") == "idle":
                    return "idle"
            else:
                col.handle(msg["msg_type"], content)

    def drain_shell_reply(self, msg_id, col):
        """Read the execute_reply (execution_count; keeps the shell channel empty)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                count = msg.get("content", {}).get("execution_count")
                if col.execution_count is None and isinstance(count, int):
                    col.execution_count = count
                return

    def op_execute(self, code, timeout_s):
        note = None
        if not self.alive():  # died while idle (e.g. killed by the OOM killer)
            self.restart()
            note = "the kernel had died since the last call; a new one was started, all state was lost"
        col = Collector()
        # stop_on_error=False: otherwise a cell that fails (an interrupted one
        # too) makes the kernel abort the requests that reach it right after,
        # and the next call would get an empty "aborted" answer. Cells run one
        # at a time here, so there is never a queue worth aborting.
        msg_id = self.kc.execute(code, silent=False, store_history=True, allow_stdin=False,
                                 stop_on_error=False)
        state = self.wait_idle(msg_id, time.monotonic() + timeout_s, col)
        timed_out = state == "timeout"
        if timed_out:
            # Interrupt (SIGINT -> KeyboardInterrupt) keeps the kernel and its state.
            try:
                self.km.interrupt_kernel()
            except Exception as e:
                log(f"interrupt_kernel: {e!r}")
            state = self.wait_idle(msg_id, time.monotonic() + INTERRUPT_WAIT_S, col)
            if state == "timeout":
                self.restart()
                note = (f"the code ran past timeout_s ({timeout_s:g} s) and did not stop when "
                        "interrupted; the kernel was restarted and all state was lost")
        if state == "died":
            output = (col.stdout.value() + col.stderr.value())[-2000:]
            self.restart()
            raise Failed("the kernel died while running this code (e.g. os._exit, a crash or "
                         "out of memory); a new kernel was started and all state was lost"
                         + (f". Output before it died:\n{output}" if output else ""))
        if state == "idle":
            self.drain_shell_reply(msg_id, col)
        result = col.to_result(timed_out)
        result["truncated"] = col.stdout.truncated or col.stderr.truncated
        if note:
            result.update(restarted=True, note=note)
        return result

    def close(self):
        self.stop()
        shutil.rmtree(TMP, ignore_errors=True)


# ---- protocol ----------------------------------------------------------------

def timeout_arg(req, default):
    t = req.get("timeout_s", default)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= MAX_TIMEOUT_S:
        raise InvalidInput(f"timeout_s must be a number greater than 0 and at most {MAX_TIMEOUT_S}")
    return float(t)


def check_keys(req, allowed):
    extra = set(req) - {"id", "op"} - set(allowed)
    if extra:
        raise InvalidInput(f"unknown argument(s) for {req['op']}: {', '.join(sorted(extra))}")


def handle(nb, req):
    op = req.get("op")
    if op == "ping":
        return {"pong": True}
    if op == "execute":
        check_keys(req, ["code", "timeout_s"])
        code = req.get("code")
        if not isinstance(code, str):
            raise InvalidInput("code must be a string")
        return nb.op_execute(code, timeout_arg(req, 30))
    if op == "restart":
        check_keys(req, [])
        nb.restart()
        return {"restarted": True}
    raise InvalidInput(f"unknown op {op!r} (expected ping, execute or restart)")



class Steps:
    """The steps of a traced request (one that carries the host's `trace`):
    names and Unix times in ns, sent back beside the result as `steps`; the
    host shows them as spans under the request's `node.exec`."""

    def __init__(self):
        self.taken = None

    def begin(self, trace):
        self.taken = [] if isinstance(trace, dict) else None

    @contextlib.contextmanager
    def step(self, name, **attributes):
        if self.taken is None:
            yield attributes
            return
        start = time.time_ns()
        try:
            yield attributes
        finally:
            self.taken.append({"name": name, "start_ns": start, "end_ns": time.time_ns(), "attributes": attributes})

    def traced(self, name):
        """`function` as a step named `name` of the requests it runs in."""
        def wrap(function):
            @functools.wraps(function)
            def run(*args, **kwargs):
                with self.step(name):
                    return function(*args, **kwargs)
            return run
        return wrap

    def attach(self, reply):
        if self.taken is not None:
            reply["steps"] = self.taken[-64:]
            self.taken = None
        return reply


STEPS = Steps()
Notebook.start = STEPS.traced("kernel.start")(Notebook.start)
Notebook.wait_idle = STEPS.traced("kernel.execute")(Notebook.wait_idle)


def send(obj):
    # json.dumps escapes control characters: one object is always one line.
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
    sys.stdout.buffer.flush()


def serve(nb):
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        rid = None
        try:
            try:
                req = json.loads(raw)
            except ValueError as e:
                raise InvalidInput(f"request is not valid JSON: {e}") from e
            if not isinstance(req, dict):
                raise InvalidInput("request must be a JSON object")
            rid = req.get("id") if isinstance(req.get("id"), int) and not isinstance(req.get("id"), bool) else None
            if rid is None:
                raise InvalidInput("request needs an integer id")
            if not isinstance(req.get("op"), str):
                raise InvalidInput("request needs an op (string)")
            STEPS.begin(req.pop("trace", None))
            with STEPS.step(req["op"]):
                result = handle(nb, req)
            send(STEPS.attach({"id": rid, "ok": True, "result": result}))
        except InvalidInput as e:
            send(STEPS.attach({"id": rid, "ok": False, "error": {"kind": "invalid_input", "message": str(e)}}))
        except Failed as e:
            send(STEPS.attach({"id": rid, "ok": False, "error": {"kind": "failed", "message": str(e)}}))
        except Exception as e:  # never crash on one request
            log(f"internal error: {e!r}")
            send(STEPS.attach({"id": rid, "ok": False, "error": {"kind": "failed", "message": f"internal driver error: {e!r}"}}))


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    nb = None
    try:
        nb = Notebook()
        send({"ready": True, "driver": DRIVER, "protocol": PROTOCOL})
        serve(nb)
    except BrokenPipeError:
        pass
    finally:
        if nb is not None:
            nb.close()
        else:
            shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
