#!/usr/bin/env python3
"""toolhost shell driver: one persistent bash, driven over a line-JSON protocol.

Runs inside a toolhost node container as `python3 -u /opt/toolhost/driver.py`,
stdin/stdout attached by `docker exec -i`. Protocol (version 1), one JSON object
per line each way:

    <- {"ready": true, "driver": "shell", "protocol": 1}
    -> {"id": 1, "op": "run", "command": "ls", "timeout_s": 30}
    <- {"id": 1, "ok": true, "result": {...}}
    <- {"id": 1, "ok": false, "error": {"kind": "invalid_input" | "failed", "message": "..."}}

Ops: ping, run {command, timeout_s?}, read_output {timeout_s?}, kill {}.

How a command runs: its text is written to a private temp file and the persistent
bash is sent the line

    { builtin . FILE ; } 0<&247 247<&-; rc=$?; printf '\\nTOKEN:%d\\n' $rc; ... >&2

with a random TOKEN per command. Sourcing keeps cwd/variables in the shell, the
command cannot read the driver's stdin (its stdin is fd 247 of bash: an empty pipe
whose write end is closed, so it works even when /dev/null is gone), and no command text (quotes, braces, the
token itself) can break the framing; a syntax error is just a non-zero status.
The command is finished once the sentinel has been seen on both stdout and
stderr, so both streams are complete. Logs go to stderr only.
"""
import contextlib
import functools
import json
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DRIVER = "shell"
PROTOCOL = 1
HEAD_CAP = 1 << 20  # per stream and response: keep the first 1 MiB ...
TAIL_CAP = 256 << 10  # ... and the last 256 KiB
MAX_TIMEOUT_S = 600
KILL_GRACE_S = 1.0
NULL_FD = 247  # bash's fd of an always-empty stdin for commands (see the docstring)
RESTART_NOTE = "the shell exited; a new one was started, state (cwd, variables) was lost"


class InvalidInput(Exception):
    """The caller's fault: bad arguments, unknown op, wrong state."""


class Failed(Exception):
    """The tool failed."""


def log(*parts):
    print("shell-driver:", *parts, file=sys.stderr, flush=True)


def utf8_complete(data):
    """Length of the longest prefix of `data` not ending inside a UTF-8 sequence."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 != 0x80:  # a lead byte (or ASCII): is its sequence complete?
            need = 1 if b < 0x80 else 2 if b >> 5 == 6 else 3 if b >> 4 == 14 else 4 if b >> 3 == 30 else 1
            return n if back >= need else n - back
    return n


class Capped:
    """Bytes of one stream for one response: head and tail kept, middle dropped."""

    def __init__(self):
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, data):
        room = HEAD_CAP - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * TAIL_CAP:  # trim rarely, so it stays cheap
                cut = len(self.tail) - TAIL_CAP
                self.dropped += cut
                del self.tail[:cut]

    def take(self):
        """(text, truncated) and reset."""
        if len(self.tail) > TAIL_CAP:
            cut = len(self.tail) - TAIL_CAP
            self.dropped += cut
            del self.tail[:cut]
        text = self.head.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[... toolhost: {self.dropped} bytes of output dropped ...]\n"
        text += self.tail.decode("utf-8", "replace")
        truncated = self.dropped > 0
        self.__init__()
        return text, truncated


class Stream:
    """One of bash's output pipes, scanned for the current command's sentinel."""

    def __init__(self, fd):
        self.fd = fd
        self.eof = False
        self.out = Capped()
        self.pending = bytearray()  # bytes that may be the start of the sentinel
        self.marker = None  # b"\nTOKEN:" while a command runs
        self.rc = None  # exit status, once the sentinel was seen

    def expect(self, token):
        self.marker, self.rc, self.pending = b"\n" + token.encode() + b":", None, bytearray()

    def feed(self, data):
        if self.marker is None or self.rc is not None:
            self.out.add(data)  # output between commands (background jobs)
            return
        self.pending += data
        i = self.pending.find(self.marker)
        if i >= 0:
            j = self.pending.find(b"\n", i + len(self.marker))
            if j < 0:  # sentinel not complete yet
                self.out.add(self.pending[:i])
                del self.pending[:i]
                return
            self.out.add(self.pending[:i])
            try:
                self.rc = int(self.pending[i + len(self.marker):j])
            except ValueError:
                self.rc = -1
            rest = self.pending[j + 1:]
            self.pending = bytearray()
            if rest:
                self.out.add(rest)
            return
        # Hold back only what may be the start of the sentinel (it begins with a
        # newline), and an incomplete UTF-8 character, so no response splits one.
        cut = len(self.pending)
        nl = self.pending.rfind(b"\n", max(0, cut - len(self.marker) + 1))
        if nl >= 0 and self.marker.startswith(self.pending[nl:]):
            cut = nl
        cut = utf8_complete(self.pending[:cut])
        self.out.add(self.pending[:cut])
        del self.pending[:cut]

    def read(self):
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.feed(data)
        else:
            self.eof = True

    def flush_pending(self):
        """On bash's death: whatever was held back is output."""
        self.out.add(self.pending)
        self.pending = bytearray()


def proc_table():
    """{pid: (ppid, session, state)} from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) "
        table[int(name)] = (int(fields[1]), int(fields[3]), fields[0])
    return table


def descendants(root):
    """Live descendants of `root`, plus anything left in its session (orphans that
    were re-parented to init), excluding `root` itself and zombies."""
    table = proc_table()
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    found |= {pid for pid, (_, sid, _) in table.items() if sid == root}
    found -= {root, os.getpid()}
    return {pid for pid in found if pid in table and table[pid][2] != b"Z"}


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class Shell:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="toolhost-shell-")
        self.cwd = "/workspace" if os.path.isdir("/workspace") else os.getcwd()
        self.bash = None
        self.running = False
        self.last_rc = None
        self.start()

    # ---- bash lifecycle -------------------------------------------------
    def start(self):
        env = dict(os.environ)
        env.update(TERM="dumb", PAGER="cat", GIT_PAGER="cat", DEBIAN_FRONTEND="noninteractive")
        # Commands read stdin from fd NULL_FD: an empty pipe, always at EOF.
        r, w = os.pipe()
        os.close(w)
        os.dup2(r, NULL_FD, inheritable=False)  # pass_fds makes it inheritable in bash
        os.close(r)
        try:
            # Own session: bash's session id = its pid, so kill() also finds
            # orphaned grandchildren. Not signalled itself: a non-interactive bash
            # would exit on SIGINT.
            self.bash = subprocess.Popen(
                ["/bin/bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.cwd, env=env,
                start_new_session=True, bufsize=0, pass_fds=(NULL_FD,))
        except OSError as e:
            self.bash = None
            raise Failed(f"cannot start bash: {e}") from e
        finally:
            os.close(NULL_FD)
        self.streams = [Stream(self.bash.stdout.fileno()), Stream(self.bash.stderr.fileno())]
        for s in self.streams:
            os.set_blocking(s.fd, False)
        self.running = False
        self.last_rc = None

    def stop(self):
        if self.bash is None:
            return
        signal_all(descendants(self.bash.pid), signal.SIGKILL)
        self.bash.kill()
        self.bash.wait()
        for f in (self.bash.stdin, self.bash.stdout, self.bash.stderr):
            f.close()
        self.bash = None

    def alive(self):
        return self.bash is not None and self.bash.poll() is None

    def restart(self):
        """Replace a dead (or wedged) bash; the result fields to report."""
        self.stop()
        self.start()
        return {"restarted": True, "note": RESTART_NOTE}

    # ---- output -----------------------------------------------------------
    def pump(self, deadline):
        """Drain both pipes until the command finished, bash died, or `deadline`.
        Returns "finished", "died" or "timeout"."""
        while True:
            if self.running and all(s.rc is not None for s in self.streams):
                return "finished"
            if not self.alive():
                self.drain_now()
                return "died"
            fds = [s.fd for s in self.streams if not s.eof]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if not fds:  # both pipes closed: bash is exiting
                time.sleep(min(remaining, 0.01))
                continue
            ready, _, _ = select.select(fds, [], [], min(remaining, 0.25))
            for s in self.streams:
                if s.fd in ready:
                    s.read()

    def drain_now(self):
        """Read whatever is available without waiting."""
        for _ in range(1024):
            fds = [s.fd for s in self.streams if not s.eof]
            ready = select.select(fds, [], [], 0)[0] if fds else []
            if not ready:
                return
            for s in self.streams:
                if s.fd in ready:
                    s.read()

    def collect(self, state):
        """Build the run/read_output result after pump() returned `state`."""
        extra = {}
        if state == "finished":
            self.last_rc = self.streams[0].rc
            self.running = False
        elif state == "died":
            for s in self.streams:
                s.flush_pending()
            self.last_rc = self.bash.returncode if self.running else self.last_rc
            self.running = False
        out, out_trunc = self.streams[0].out.take()
        err, err_trunc = self.streams[1].out.take()
        result = {
            "stdout": out, "stderr": err,
            "exit_code": None if self.running else self.last_rc,
            "finished": not self.running, "truncated": out_trunc or err_trunc,
        }
        if state == "died":
            try:
                extra = self.restart()  # state (cwd, variables) is gone anyway
            except Failed as e:
                extra = {"restarted": False, "note": f"the shell exited and a new one could not be started: {e}"}
        if not self.running:
            self.cleanup_command_file()
        result.update(extra)
        return result

    def cleanup_command_file(self):
        try:
            os.unlink(os.path.join(self.tmp, "command.sh"))
        except OSError:
            pass

    # ---- ops ---------------------------------------------------------------
    def check_alive(self):
        """At the start of an op: restart a bash that died while idle."""
        if self.alive():
            return {}
        if self.bash is None:  # a previous start failed: try again
            self.start()
            return {}
        return self.restart()

    def op_run(self, command, timeout_s):
        extra = self.check_alive()
        if self.running:
            raise InvalidInput("a command is still running: call read_output or kill")
        os.makedirs(self.tmp, mode=0o700, exist_ok=True)
        path = os.path.join(self.tmp, "command.sh")
        try:
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(command)
                f.write("\n")
        except OSError as e:
            raise Failed(f"cannot write the command file: {e}") from e
        token = "__toolhost_" + secrets.token_hex(16)
        line = (f"{{ builtin . {shlex.quote(path)} ; }} 0<&{NULL_FD} {NULL_FD}<&-; __toolhost_rc=$?; "
                f"builtin printf '\\n{token}:%d\\n' \"$__toolhost_rc\"; "
                f"builtin printf '\\n{token}:%d\\n' \"$__toolhost_rc\" >&2\n")
        for s in self.streams:
            s.expect(token)
        self.drain_now()  # stray output since the last call belongs before this command
        try:
            self.bash.stdin.write(line.encode())
            self.bash.stdin.flush()
        except OSError:
            pass  # bash died: pump() notices and reports
        self.running = True
        result = self.collect(self.pump(time.monotonic() + timeout_s))
        for k, v in extra.items():
            result.setdefault(k, v)
        return result

    def op_read_output(self, timeout_s):
        extra = self.check_alive()
        if not self.running:
            self.drain_now()
            result = self.collect("idle")
        else:
            result = self.collect(self.pump(time.monotonic() + timeout_s))
        for k, v in extra.items():
            result.setdefault(k, v)
        return result

    def op_kill(self):
        extra = self.check_alive()
        killed = self.kill_children()
        state = "idle"
        if self.running:
            state = self.pump(time.monotonic() + 2.0)
            if state == "timeout":
                # bash itself is stuck (e.g. its stdout was redirected away): replace it
                self.drain_now()
                self.running = False
                self.last_rc = None
                result = self.collect("idle")
                result.update(self.restart(), killed=True, finished=True)
                return result
        result = self.collect(state)
        result["killed"] = killed
        result["finished"] = True
        for k, v in extra.items():
            result.setdefault(k, v)
        return result

    def kill_children(self):
        """SIGINT every descendant of bash, then SIGKILL what is left after
        KILL_GRACE_S. Processes are stopped before being killed so a fork bomb
        cannot outrun the scan. Returns whether there was anything to kill."""
        root = self.bash.pid
        pids = descendants(root)
        if not pids:
            return False
        signal_all(pids, signal.SIGINT)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            self.drain_now()  # a child blocked on a full pipe must see its signal
            if not descendants(root):
                return True
            time.sleep(0.05)
        for _ in range(200):
            pids = descendants(root)
            if not pids:
                break
            frozen = set()
            for _ in range(20):  # freeze until no new process appears
                new = pids - frozen
                if not new:
                    break
                signal_all(new, signal.SIGSTOP)
                frozen |= new
                pids = descendants(root)
            signal_all(frozen, signal.SIGKILL)
            signal_all(frozen, signal.SIGCONT)
            self.drain_now()
            time.sleep(0.01)
        return True

    def close(self):
        try:
            if self.alive():
                self.kill_children()
        finally:
            self.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- protocol ----------------------------------------------------------------

def timeout_arg(req, default):
    t = req.get("timeout_s", default)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= MAX_TIMEOUT_S:
        raise InvalidInput(f"timeout_s must be a number between 0 and {MAX_TIMEOUT_S}")
    return float(t)


def check_keys(req, allowed):
    extra = set(req) - {"id", "op"} - set(allowed)
    if extra:
        raise InvalidInput(f"unknown argument(s) for {req['op']}: {', '.join(sorted(extra))}")


def handle(shell, req):
    op = req.get("op")
    if op == "ping":
        return {"pong": True}
    if op == "run":
        check_keys(req, ["command", "timeout_s"])
        command = req.get("command")
        if not isinstance(command, str):
            raise InvalidInput("command must be a string")
        if "\0" in command:
            raise InvalidInput("command must not contain NUL characters")
        return shell.op_run(command, timeout_arg(req, 30))
    if op == "read_output":
        check_keys(req, ["timeout_s"])
        return shell.op_read_output(timeout_arg(req, 10))
    if op == "kill":
        check_keys(req, [])
        return shell.op_kill()
    raise InvalidInput(f"unknown op {op!r} (expected ping, run, read_output or kill)")



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
Shell.start = STEPS.traced("shell.start")(Shell.start)
Shell.pump = STEPS.traced("shell.wait_output")(Shell.pump)


def send(obj):
    # json.dumps escapes control characters: one object is always one line.
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
    sys.stdout.buffer.flush()


def serve(shell):
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
                result = handle(shell, req)
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
    shell = Shell()
    try:
        shell.op_run("true", 10)  # one round trip: the shell really answers
        send({"ready": True, "driver": DRIVER, "protocol": PROTOCOL})
        serve(shell)
    except BrokenPipeError:
        pass
    finally:
        shell.close()


if __name__ == "__main__":
    main()
