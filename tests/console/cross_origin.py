"""Web pages against a loopback toolhost, in a real browser (issue #37 item 1).

Debian's headless Chromium, driven by Selenium through Debian's
chromium-driver, opens pages served from another origin (a Python
http.server on its own loopback port) that try every way a page has to make
the server run a tool without asking: `fetch` in no-cors mode with a
`text/plain` body (native and XAgent routes), `navigator.sendBeacon`, a
`text/plain` form posted into an iframe, a CORS `fetch` with a JSON body
(preflighted), and DNS rebinding (the page's own name mapped to 127.0.0.1 by
Chromium's resolver rules, so its requests are same-origin for the browser
and name a foreign `Host`). The tool's call count, read afterwards without a
browser, must not move. A second server lists the page's origin in
`[server] allowed_origins`: there the CORS `fetch` is answered and its
result read by the page, so configured CORS works.

Started by tests/e2e/tests/console.rs; prints `ok <scenario>` for each
scenario that passed and exits non-zero at the first failure.

    python cross_origin.py --url http://127.0.0.1:A --listed-url http://127.0.0.1:B
        --page-port P
"""

import argparse
import http.server
import json
import sys
import threading
import time
import urllib.request

from console_test import browser

TOOL = "calc_evaluate"

ATTACK = """<!doctype html><meta charset=utf-8><title>attack</title>
<iframe name=sink></iframe>
<form id=f target=sink method=post enctype="text/plain"
      action="TARGET/tools/calc_evaluate/invoke">
  <input name='{"params":{"expression":"1","x":"' value='"}}'>
</form>
<script>
const T = "TARGET";
const body = JSON.stringify({params: {expression: "6*7"}});
const results = {};
async function attempt(name, f) {
  try { results[name] = await f(); } catch (e) { results[name] = "error: " + e; }
}
(async () => {
  await attempt("no-cors text/plain", async () => {
    const r = await fetch(T + "/tools/calc_evaluate/invoke",
      {method: "POST", mode: "no-cors", headers: {"content-type": "text/plain"}, body});
    return r.type;
  });
  await attempt("no-cors xagent", async () => {
    const r = await fetch(T + "/execute_tool", {method: "POST", mode: "no-cors",
      headers: {"content-type": "text/plain"},
      body: JSON.stringify({tool_name: "calc_evaluate", arguments: {expression: "1"}})});
    return r.type;
  });
  await attempt("no-cors untyped", async () => {
    const r = await fetch(T + "/tools/calc_evaluate/invoke",
      {method: "POST", mode: "no-cors", body: new Blob([body])});
    return r.type;
  });
  await attempt("beacon", async () =>
    navigator.sendBeacon(T + "/tools/calc_evaluate/invoke", body));
  await attempt("cors json", async () => {
    const r = await fetch(T + "/tools/calc_evaluate/invoke",
      {method: "POST", headers: {"content-type": "application/json"}, body});
    return "status " + r.status + " " + JSON.stringify((await r.json()).result);
  });
  document.getElementById("f").submit();
  await new Promise(r => setTimeout(r, 1500));
  window.results = results;
  document.title = "done";
})();
</script>"""

# Run in a page of the rebound origin itself (its requests are same-origin).
REBIND = """const done = arguments[arguments.length - 1];
fetch("/tools/calc_evaluate/invoke", {method: "POST",
  headers: {"content-type": "application/json"},
  body: JSON.stringify({params: {expression: "6*7"}})})
  .then(async r => done({status: r.status, body: await r.text()}))
  .catch(e => done({error: String(e)}));"""


def serve_pages(port, pages):
    """Serve `pages` (path -> HTML) on 127.0.0.1:port, in a thread."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            page = pages.get(self.path)
            self.send_response(200 if page else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write((page or "").encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def calls(url):
    """The tool's call count, asked as a non-browser client asks."""
    with urllib.request.urlopen(f"{url}/tools/{TOOL}", timeout=10) as r:
        return json.load(r)["stats"]["call_count"]


def run_page(driver, url):
    driver.get(url)
    deadline = time.time() + 30
    while driver.title != "done":
        if time.time() > deadline:
            raise AssertionError(f"{url} never finished")
        time.sleep(0.1)
    return driver.execute_script("return window.results")


def ok(name):
    print(f"ok {name}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="a default loopback server")
    p.add_argument("--listed-url", required=True, help="a server listing the page's origin")
    p.add_argument("--page-port", type=int, required=True)
    args = p.parse_args()
    port = args.url.rsplit(":", 1)[1]
    page_origin = f"http://127.0.0.1:{args.page_port}"
    pages = {
        "/attack.html": ATTACK.replace("TARGET", args.url),
        "/listed.html": ATTACK.replace("TARGET", args.listed_url),
    }
    pages_server = serve_pages(args.page_port, pages)
    driver = browser("--host-resolver-rules=MAP rebind.example 127.0.0.1")
    try:
        before = calls(args.url)
        results = run_page(driver, f"{page_origin}/attack.html")
        time.sleep(1.0)  # a beacon may land after the page is done
        after = calls(args.url)
        print(json.dumps(results, indent=1))
        assert after == before, f"a page on {page_origin} ran the tool {after - before} times"
        assert "status" not in str(results.get("cors json")), results
        ok("cross_origin_refused")

        # DNS rebinding: the attacker's name now resolves to 127.0.0.1, so
        # its page and the server are one origin for the browser, and nothing
        # but the Host check stands in the way. The page itself is refused;
        # a script running in that origin is refused too.
        driver.get(f"http://rebind.example:{port}/tools")
        assert "not a name of this server" in driver.page_source, driver.page_source
        driver.set_script_timeout(20)
        results = driver.execute_async_script(REBIND)
        print(json.dumps(results, indent=1))
        assert results.get("status") == 403, results
        assert "not a name of this server" in results.get("body", ""), results
        assert calls(args.url) == before, "a rebound page ran the tool"
        ok("rebinding_refused")

        # A listed origin: its preflighted CORS call is served and readable.
        before = calls(args.listed_url)
        results = run_page(driver, f"{page_origin}/listed.html")
        print(json.dumps(results, indent=1))
        cors = results.get("cors json", "")
        assert cors.startswith("status 200 ") and '"value":42' in cors, results
        # The origin is trusted there: its CORS call and its untyped body run;
        # bodies typed as text or forms are still refused (415).
        assert calls(args.listed_url) == before + 2, results
        ok("listed_origin_served")
    finally:
        driver.quit()
        pages_server.shutdown()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
