#!/usr/bin/env python3
"""toolhost browser driver: headless Chromium over CDP, driven by a line-JSON protocol.

Runs inside a toolhost node container as `python3 -u /opt/toolhost/driver.py`,
stdin/stdout attached by `docker exec -i`. Protocol (version 1), one JSON object
per line each way:

    <- {"ready": true, "driver": "browser", "protocol": 1}
    -> {"id": 1, "op": "open", "url": "https://example.org/"}
    <- {"id": 1, "ok": true, "result": {...}}
    <- {"id": 1, "ok": false, "error": {"kind": "invalid_input" | "failed", "message": "..."}}

Ops: ping, open {url, timeout_s?, max_chars?}, screenshot {url?, full_page?, timeout_s?}.

Chromium is started before the ready line (so a warm container is really warm; if
it cannot start, the error is reported by the first op, which retries). It is
driven over --remote-debugging-pipe: no TCP port, no websocket. The driver writes
NUL-terminated JSON commands to Chromium's fd 3 and reads NUL-terminated replies
and events from its fd 4. One page target is used, attached in flat session mode.
If Chromium dies, the next op starts a new one and says so ("restarted": true).
"""
import contextlib
import functools
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

DRIVER = "browser"
PROTOCOL = 1
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = (1280, 800)
MAX_TIMEOUT_S = 600
MAX_SHOT_HEIGHT = 16384  # full-page screenshots are cut at this height (px)
MAX_LINKS = 100
SCHEMES = ("http", "https", "file", "data")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--disable-extensions", "--disable-breakpad",
    "--disable-features=Translate,MediaRouter,OptimizationHints", "--hide-scrollbars", "--mute-audio",
    "--password-store=basic", "--lang=en-US", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
    "--remote-debugging-pipe",
]

# Readable text of the page as light markdown, plus title, final URL and links.
# Runs in the page (Runtime.evaluate); argument: the maximum number of characters.
EXTRACT_JS = r"""
(maxChars) => {
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "CANVAS", "IFRAME", "OBJECT",
    "EMBED", "NAV", "FOOTER", "ASIDE", "HEAD", "BUTTON", "SELECT", "INPUT", "TEXTAREA", "DIALOG", "MENU"]);
  const BLOCK = new Set(["ADDRESS", "ARTICLE", "BODY", "CENTER", "DD", "DETAILS", "DIV", "DL", "DT",
    "FIELDSET", "FIGCAPTION", "FIGURE", "FORM", "HEADER", "HGROUP", "HR", "LI", "MAIN", "P", "SECTION",
    "SUMMARY", "CAPTION"]);
  const BR = "\uE000";  // a line break inside a paragraph survives whitespace collapsing
  const clean = (s) => s.replace(/\s+/g, " ").replace(/ ?\uE000 ?/g, "\n").trim();
  const here = location.href.split("#")[0];
  const hidden = (el) => el.hidden || el.getAttribute("aria-hidden") === "true"
    || el.getAttribute("role") === "navigation" || (el.checkVisibility ? !el.checkVisibility() : false);
  const linkable = (href) => /^(https?|file):/i.test(href) && !(href.includes("#") && href.split("#")[0] === here);
  function blocks(root) {
    const out = [];
    let inl = "";
    const flush = () => { const t = clean(inl); if (t) out.push(t); inl = ""; };
    const visit = (node) => {
      for (const c of node.childNodes) {
        if (c.nodeType === 3) { inl += c.nodeValue; continue; }
        if (c.nodeType !== 1) continue;
        const tag = c.tagName.toUpperCase();
        if (SKIP.has(tag) || hidden(c)) continue;
        if (tag === "BR") { inl += BR; continue; }
        if (/^H[1-6]$/.test(tag)) {
          flush(); const t = clean(blocks(c).join(" "));
          if (t) out.push("#".repeat(+tag[1]) + " " + t);
        } else if (tag === "UL" || tag === "OL") {
          flush(); const t = list(c, tag === "OL"); if (t) out.push(t);
        } else if (tag === "PRE") {
          flush(); const t = c.innerText.replace(/\n+$/, "");
          if (t.trim()) out.push("```\n" + t + "\n```");
        } else if (tag === "BLOCKQUOTE") {
          flush(); const b = blocks(c);
          if (b.length) out.push(b.join("\n\n").split("\n").map((l) => "> " + l).join("\n"));
        } else if (tag === "TABLE") {
          flush(); const t = table(c); if (t) out.push(t);
        } else if (tag === "A") {
          const text = clean(blocks(c).join(" ")) || (c.getAttribute("aria-label") || "").trim();
          if (text) inl += linkable(c.href) ? `[${text}](${c.href})` : text;
        } else if (tag === "CODE") {
          const t = c.textContent.replace(/\s+/g, " ").trim(); if (t) inl += "`" + t + "`";
        } else if (BLOCK.has(tag)) {
          flush(); visit(c); flush();
        } else {
          visit(c);  // inline element
        }
      }
    };
    visit(root); flush();
    return out;
  }
  function list(el, ordered) {
    const lines = []; let n = 1;
    for (const li of el.children) {
      if (li.tagName !== "LI" || hidden(li)) continue;
      const body = blocks(li).join("\n").split("\n").filter((l) => l.trim());
      if (!body.length) continue;
      lines.push((ordered ? `${n++}. ` : "- ") + body[0], ...body.slice(1).map((l) => "  " + l));
    }
    return lines.join("\n");
  }
  function table(el) {
    const rows = [];
    for (const tr of Array.from(el.rows).slice(0, 500)) {
      const cells = Array.from(tr.cells).map((td) => clean(blocks(td).join(" ")).replace(/\|/g, "\\|"));
      if (!cells.some((c) => c)) continue;
      rows.push("| " + cells.join(" | ") + " |");
      if (rows.length === 1) rows.push("|" + cells.map(() => " --- |").join(""));
    }
    return rows.join("\n");
  }
  const text = blocks(document.body || document.documentElement).join("\n\n");
  const links = [], seen = new Set();
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.href;
    if (!linkable(href) || seen.has(href)) continue;
    seen.add(href);
    const t = clean(a.innerText || a.getAttribute("aria-label") || a.title || "").slice(0, 200);
    links.push({text: t, href});
    if (links.length >= %(max_links)d) break;
  }
  return {url: location.href, title: document.title, text: text.slice(0, maxChars), total: text.length, links};
}
""".replace("%(max_links)d", str(MAX_LINKS))

FALLBACK_JS = ("({url: location.href, title: document.title, total: -1, links: [],"
               " text: document.body ? document.body.innerText : ''})")


class InvalidInput(Exception):
    """The caller's fault: bad arguments, unknown op, no page open."""


class Failed(Exception):
    """The tool failed."""


class BrowserGone(Exception):
    """Chromium exited or closed its pipe."""


class CDPTimeout(Exception):
    """No reply or event in time."""


def log(*parts):
    print("browser-driver:", *parts, file=sys.stderr, flush=True)


class CDP:
    """Chrome DevTools Protocol over a pipe pair: NUL-terminated JSON messages."""

    def __init__(self, wfd, rfd):
        self.wfd, self.rfd = wfd, rfd
        self.buf, self.scanned = bytearray(), 0
        self.next_id = 0
        self.replies, self.ignored = {}, set()
        self.events = []  # events of `session` (the page in use) and of the browser
        self.session = None

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self.wfd, data):]
        except OSError as e:
            raise BrowserGone(f"cannot write to Chromium: {e}") from e
        return self.next_id

    def pump(self, timeout):
        """Read what arrives within `timeout` seconds and dispatch it."""
        ready, _, _ = select.select([self.rfd], [], [], max(0.0, timeout))
        if not ready:
            return
        try:
            data = os.read(self.rfd, 1 << 20)
        except OSError as e:
            raise BrowserGone(f"cannot read from Chromium: {e}") from e
        if not data:
            raise BrowserGone("Chromium closed its DevTools pipe")
        self.buf += data
        while True:
            end = self.buf.find(b"\0", self.scanned)
            if end < 0:
                self.scanned = len(self.buf)
                return
            msg = json.loads(self.buf[:end])
            del self.buf[:end + 1]
            self.scanned = 0
            self.dispatch(msg)

    def dispatch(self, msg):
        if "id" in msg:
            if msg["id"] in self.ignored:
                self.ignored.discard(msg["id"])
            else:
                self.replies[msg["id"]] = msg
            return
        method = msg.get("method", "")
        if msg.get("sessionId", self.session) != self.session:
            return  # from a tab that was replaced
        if method == "Page.javascriptDialogOpening":  # alert()/confirm() would block the page
            self.ignored.add(self.send("Page.handleJavaScriptDialog", {"accept": True}, msg.get("sessionId")))
        elif method in ("Page.lifecycleEvent", "Network.responseReceived", "Inspector.targetCrashed"):
            self.events.append(msg)
            del self.events[:-5000]

    def drain(self):
        """Dispatch whatever arrived while the driver was idle (e.g. a crash event)."""
        while select.select([self.rfd], [], [], 0)[0]:
            self.pump(0)

    def wait_reply(self, msg_id, deadline):
        while msg_id not in self.replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.ignored.add(msg_id)
                raise CDPTimeout()
            self.pump(min(remaining, 0.5))
        msg = self.replies.pop(msg_id)
        if "error" in msg:
            raise Failed(msg["error"].get("message", "DevTools error"))
        return msg.get("result", {})

    def call(self, method, params=None, session=None, timeout=10.0):
        return self.wait_reply(self.send(method, params, session), time.monotonic() + timeout)

    def wait_event(self, match, deadline):
        """First queued or arriving event for which match(method, params) is true."""
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if match(ev["method"], ev.get("params", {})):
                    return ev
            seen = len(self.events)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CDPTimeout()
            self.pump(min(remaining, 0.5))


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return struct.unpack(">II", data[16:24])


class Browser:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="toolhost-browser-")
        self.proc = self.cdp = self.session = self.target = None
        self.has_page = False
        self.started_once = False
        self.page_crashed = False

    # ---- lifecycle ---------------------------------------------------------
    def start(self):
        profile = tempfile.mkdtemp(prefix="profile-", dir=self.tmp)
        env = dict(os.environ, HOME=self.tmp, XDG_CONFIG_HOME=os.path.join(self.tmp, "config"),
                   XDG_CACHE_HOME=os.path.join(self.tmp, "cache"))
        cmd_r, cmd_w = os.pipe()  # driver -> Chromium (its fd 3)
        ev_r, ev_w = os.pipe()  # Chromium (its fd 4) -> driver
        for fd in (cmd_w, ev_r):
            try:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)  # fewer wake-ups for screenshots
            except OSError:
                pass

        def child_fds():  # runs in the child: its fds 3 and 4 become the pipe ends
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(ev_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log_path = os.path.join(self.tmp, "chromium.log")
        try:
            with open(self.log_path, "ab") as log_file:
                # close_fds=False: only inheritable fds pass (0-2 and the dup2'ed 3, 4).
                self.proc = subprocess.Popen(
                    [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file, env=env,
                    cwd=self.tmp, close_fds=False, preexec_fn=child_fds, start_new_session=True)
        except OSError as e:
            raise Failed(f"cannot start Chromium ({CHROMIUM}): {e}") from e
        finally:
            os.close(cmd_r)
            os.close(ev_w)
        self.cdp = CDP(cmd_w, ev_r)
        self.started_once = True
        self.has_page = False
        try:
            self.cdp.call("Browser.getVersion", timeout=30)
            self.cdp.call("Browser.setDownloadBehavior", {"behavior": "deny"})
            self.open_target()
        except (CDPTimeout, BrowserGone, Failed) as e:
            tail = self.log_tail()
            self.stop()
            raise Failed(f"Chromium did not start: {e or 'no answer in time'}"
                         + (f"; its log ends with: {tail}" if tail else "")) from e

    def open_target(self, target=None):
        """Attach to `target` (default: the initial tab) and set it up."""
        cdp = self.cdp
        if target is None:
            pages = [t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
            target = pages[0]["targetId"] if pages else \
                cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.target = target
        self.session = cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        cdp.session = self.session
        cdp.events.clear()
        ids = [cdp.send(m, p, self.session) for m, p in (
            ("Page.enable", {}), ("Page.setLifecycleEventsEnabled", {"enabled": True}), ("Network.enable", {}),
            ("Emulation.setDeviceMetricsOverride",
             {"width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False}))]
        deadline = time.monotonic() + 10
        for msg_id in ids:
            cdp.wait_reply(msg_id, deadline)
        self.has_page = False
        self.page_crashed = False

    def reset_target(self):
        """Replace a crashed or hung page with a fresh tab; if even that fails,
        restart Chromium."""
        try:
            old = self.target
            new = self.cdp.call("Target.createTarget", {"url": "about:blank"}, timeout=5)["targetId"]
            # Closing may wait for a hung page: do not wait for the reply.
            self.cdp.ignored.add(self.cdp.send("Target.closeTarget", {"targetId": old}))
            self.open_target(new)
        except (CDPTimeout, Failed, BrowserGone) as e:
            log(f"cannot replace the page ({e!r}); restarting Chromium")
            self.stop()
            self.start()

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # Chromium and all its helpers
            except OSError:
                pass
            self.proc.wait()
            self.proc = None
        if self.cdp is not None:
            for fd in (self.cdp.wfd, self.cdp.rfd):
                os.close(fd)
            self.cdp = None

    def log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-600:].decode("utf-8", "replace").strip()
        except (OSError, AttributeError):
            return ""

    def ensure(self):
        """Before each op: a live browser and page. Returns True if it was restarted."""
        if self.proc is not None and self.proc.poll() is None and self.cdp is not None:
            try:
                self.cdp.drain()
            except BrowserGone:  # it closed its pipe: kill what is left, start anew
                self.stop()
                self.start()
                return True
            if self.page_crashed or any(e["method"] == "Inspector.targetCrashed" for e in self.cdp.events):
                self.cdp.events.clear()
                self.reset_target()
                return True
            return False
        restarted = self.started_once
        self.stop()
        self.start()
        return restarted

    def run(self, fn):
        """Run an op; if Chromium dies meanwhile, start a new one and retry once."""
        restarted = self.ensure()
        try:
            result = fn()
        except CDPTimeout:
            self.reset_target()
            raise Failed("timed out waiting for Chromium; the page was reset") from None
        except BrowserGone as e:
            log(f"Chromium died ({e}); restarting")
            self.stop()
            self.start()
            restarted = True
            try:
                result = fn()
            except BrowserGone as e2:
                self.stop()
                raise Failed(f"Chromium crashed twice in a row: {e2}") from e2
        if restarted:
            result["restarted"] = True
        return result

    # ---- pages ---------------------------------------------------------------
    def navigate(self, url, deadline):
        """Load `url` in the page; returns (http status or None, note or None)."""
        cdp = self.cdp
        cdp.events.clear()
        self.has_page = True
        try:
            nav = cdp.wait_reply(cdp.send("Page.navigate", {"url": url}, self.session), deadline)
        except CDPTimeout:
            self.reset_target()  # a fresh tab: the old one may be stuck in a script
            raise Failed(f"timed out: {url} did not answer within the time limit") from None
        if nav.get("errorText"):
            raise Failed(f"could not open {url}: {nav['errorText']}")
        loader, frame = nav.get("loaderId"), nav.get("frameId")
        note = None
        if loader:  # absent for same-document (#fragment) navigations

            def lifecycle(name):
                return lambda m, p: (m == "Page.lifecycleEvent" and p.get("name") == name
                                     and p.get("loaderId") == loader)

            def crashed(m, _p):
                return m == "Inspector.targetCrashed"

            try:
                ev = cdp.wait_event(lambda m, p: lifecycle("load")(m, p) or crashed(m, p), deadline)
                if crashed(ev["method"], {}):
                    self.page_crashed = True
                    raise Failed(f"the browser tab crashed while loading {url}")
            except CDPTimeout:
                if not any(lifecycle("DOMContentLoaded")(e["method"], e.get("params", {})) for e in cdp.events):
                    self.reset_target()
                    raise Failed(f"timed out: {url} did not load within the time limit") from None
                self.stop_loading()
                note = "the page did not finish loading in time; its content may be incomplete"
        status = None
        for ev in cdp.events:
            p = ev.get("params", {})
            if ev["method"] == "Network.responseReceived" and p.get("type") == "Document" \
                    and p.get("loaderId") == loader and p.get("frameId", frame) == frame:
                status = p.get("response", {}).get("status")
        return (int(status) if isinstance(status, (int, float)) and status > 0 else None), note

    def stop_loading(self):
        try:
            self.cdp.call("Page.stopLoading", session=self.session, timeout=2)
        except (CDPTimeout, Failed):
            pass

    def evaluate(self, expression, deadline):
        try:
            res = self.cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                self.session, timeout=max(deadline - time.monotonic(), 5))
        except CDPTimeout:
            self.reset_target()  # the page's main thread is stuck
            raise Failed("timed out: the page did not respond (its scripts may be stuck)") from None
        if "exceptionDetails" in res:
            return None
        return res.get("result", {}).get("value")

    def op_open(self, url, timeout_s, max_chars):
        deadline = time.monotonic() + timeout_s
        status, note = self.navigate(url, deadline)
        page = self.evaluate(f"({EXTRACT_JS})({max_chars})", deadline) or \
            self.evaluate(FALLBACK_JS, deadline) or {}
        text = str(page.get("text") or "")
        total = page.get("total", -1)
        total = len(text) if not isinstance(total, int) or total < 0 else total
        if total > max_chars or len(text) > max_chars:
            text = text[:max_chars].rstrip() + f"\n\n[... truncated: {total - max_chars} more characters ...]"
        result = {"url": page.get("url", url), "title": str(page.get("title") or ""), "status": status,
                  "text": text, "links": page.get("links", [])[:MAX_LINKS], "truncated": total > max_chars}
        if note:
            result["note"] = note
        return result

    def op_screenshot(self, url, full_page, timeout_s):
        deadline = time.monotonic() + timeout_s
        note = None
        if url is not None:
            _, note = self.navigate(url, deadline)
        elif not self.has_page:
            raise InvalidInput("no page is open: pass url, or call open first")
        params = {"format": "png"}
        if full_page:
            metrics = self.cdp.call("Page.getLayoutMetrics", session=self.session)
            size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
            width = max(1, int(size.get("width", VIEWPORT[0]) + 0.999))
            height = max(1, min(MAX_SHOT_HEIGHT, int(size.get("height", VIEWPORT[1]) + 0.999)))
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        try:
            data = self.cdp.call("Page.captureScreenshot", params, self.session,
                                 timeout=max(deadline - time.monotonic(), 5))["data"]
        except CDPTimeout:
            self.reset_target()
            raise Failed("timed out taking the screenshot") from None
        width, height = png_size(base64.b64decode(data[:64]))
        history = self.cdp.call("Page.getNavigationHistory", session=self.session)
        current = history["entries"][history["currentIndex"]]["url"] if history.get("entries") else url
        result = {"media_type": "image/png", "data": data, "width": width, "height": height, "url": current}
        if note:
            result["note"] = note
        return result

    def close(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- protocol ----------------------------------------------------------------

def url_arg(req, required):
    url = req.get("url")
    if url is None and not required:
        return None
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("url must be a non-empty string")
    url = url.strip()
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidInput(f"unsupported URL {url[:100]!r}: only http, https, file and data URLs can be opened")
    if scheme in ("http", "https") and not parts.netloc:
        raise InvalidInput(f"URL {url[:100]!r} has no host")
    return url


def timeout_arg(req, default):
    t = req.get("timeout_s", default)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= MAX_TIMEOUT_S:
        raise InvalidInput(f"timeout_s must be a number greater than 0 and at most {MAX_TIMEOUT_S}")
    return float(t)


def check_keys(req, allowed):
    extra = set(req) - {"id", "op"} - set(allowed)
    if extra:
        raise InvalidInput(f"unknown argument(s) for {req['op']}: {', '.join(sorted(extra))}")


def handle(browser, req):
    op = req.get("op")
    if op == "ping":
        return {"pong": True}
    if op == "open":
        check_keys(req, ["url", "timeout_s", "max_chars"])
        url = url_arg(req, True)
        timeout_s = timeout_arg(req, 20)
        max_chars = req.get("max_chars", 20000)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 1 <= max_chars <= 1_000_000:
            raise InvalidInput("max_chars must be an integer between 1 and 1000000")
        return browser.run(lambda: browser.op_open(url, timeout_s, max_chars))
    if op == "screenshot":
        check_keys(req, ["url", "full_page", "timeout_s"])
        url = url_arg(req, False)
        full_page = req.get("full_page", False)
        if not isinstance(full_page, bool):
            raise InvalidInput("full_page must be a boolean")
        timeout_s = timeout_arg(req, 20)
        if url is None and not browser.has_page:
            raise InvalidInput("no page is open: pass url, or call open first")
        return browser.run(lambda: browser.op_screenshot(url, full_page, timeout_s))
    raise InvalidInput(f"unknown op {op!r} (expected ping, open or screenshot)")



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
Browser.start = STEPS.traced("browser.start")(Browser.start)
Browser.navigate = STEPS.traced("page.navigate")(Browser.navigate)


def send(obj):
    # json.dumps escapes control characters: one object is always one line.
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
    sys.stdout.buffer.flush()


def serve(browser):
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
                result = handle(browser, req)
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
    browser = Browser()
    try:
        try:
            browser.start()
        except Failed as e:
            log(f"{e} (will retry on the first op)")
        send({"ready": True, "driver": DRIVER, "protocol": PROTOCOL})
        serve(browser)
    except BrokenPipeError:
        pass
    finally:
        browser.close()


if __name__ == "__main__":
    main()
