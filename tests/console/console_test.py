"""The web console (/ui) in a real browser: Debian's headless Chromium driven
by Selenium through Debian's chromium-driver, against a running toolhost
started by tests/e2e/tests/console.rs with a caller and an admin token.

Prints `ok <scenario>` for each scenario that passed and `figure <name>
<value>` for the measurements; exits non-zero at the first failure, with
a screenshot of that moment. Screenshots go to --screenshots.

    python console_test.py --url http://127.0.0.1:PORT --caller-token T
        --admin-token A --plugins-dir DIR --extra-plugin calc.wasm
        --screenshots target/console-screenshots [--notebook]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

ARGS = None
SHOTS = None


def browser(*extra):
    """Debian's headless Chromium through Debian's chromedriver, with `extra`
    command-line switches (cross_origin.py's resolver rules)."""
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in (
        "--headless=new",
        "--no-sandbox",  # root in a container: the setuid sandbox is unavailable
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,800",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--lang=en-GB",
        *extra,
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=opts)
    viewport(driver, 1280, 800)
    return driver


def viewport(driver, width, height):
    """The CSS viewport a person sees, exactly (the window has no chrome)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def shot(driver, name, full=False):
    path = os.path.join(SHOTS, f"{name}.png")
    if full:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        width = driver.execute_script("return window.innerWidth")
        data = driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 4000), "scale": 1},
            },
        )["data"]
        import base64

        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
    else:
        driver.save_screenshot(path)
    print(f"screenshot {path}")


def wait(driver, what, check, timeout=20):
    # The console re-renders what it polls (metrics, plugins): an element
    # found a moment ago may be replaced before it is read; look again.
    try:
        return WebDriverWait(
            driver, timeout, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
        ).until(lambda d: check(d))
    except TimeoutException:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None


def q(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css)


def qs(driver, css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def visible(driver, css):
    els = qs(driver, css)
    return els[0] if els and els[0].is_displayed() else None


def go(driver, hash_):
    driver.execute_script("location.hash = arguments[0]", hash_)


def ok(name):
    print(f"ok {name}", flush=True)


def figure(name, value):
    print(f"figure {name} {value}", flush=True)


def sign_in(driver, token):
    field = wait(driver, "the token prompt", lambda d: visible(d, "#token"))
    field.clear()
    field.send_keys(token)
    q(driver, "#login-form button[type=submit]").click()


def scenario_refused(d):
    d.get(ARGS.url + "/ui/")
    wait(d, "the login view", lambda d: visible(d, "#view-login"))
    assert "needs a token" in q(d, "#login-msg").text, q(d, "#login-msg").text
    sign_in(d, "not-the-right-token-at-all")
    wait(d, "the refusal", lambda d: "Token refused" in q(d, "#login-msg").text)
    text = q(d, "#login-msg").text
    assert "unknown token" in text, text
    assert not q(d, "#view-tools").is_displayed(), "nothing is shown without a valid token"
    assert d.execute_script("return sessionStorage.getItem('toolhost.token')") is None
    shot(d, "01-wrong-token")
    ok("refused")


def scenario_sign_in(d):
    sign_in(d, ARGS.admin_token)
    wait(d, "the catalogue", lambda d: visible(d, "#view-tools li[data-tool=calc_evaluate]"))
    assert q(d, "#who").text == "admin", q(d, "#who").text
    card = q(d, "li[data-tool=calc_evaluate]")
    assert "backend wasm" in card.text and "toolkit calc" in card.text, card.text
    assert "active" in card.text, card.text
    ok("sign_in")


def scenario_search(d):
    box = q(d, "#search")
    box.send_keys("evaluate an arithmetic expression")
    wait(
        d,
        "search results",
        lambda d: "best first" in q(d, "#tools-count").text
        and qs(d, "#tools-list li")
        and qs(d, "#tools-list li")[0].get_attribute("data-tool") == "calc_evaluate",
    )
    first = qs(d, "#tools-list li")[0]
    first.find_element(By.CSS_SELECTOR, "details summary").click()
    wait(d, "the input schema", lambda d: "expression" in first.find_element(By.CSS_SELECTOR, "table.schema").text)
    shot(d, "02-catalogue-search")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    wait(d, "the whole catalogue again", lambda d: "best first" not in q(d, "#tools-count").text)
    ok("search")


def invoke_and_wait(d, status, timeout=30):
    q(d, "#play-invoke").click()
    return wait(d, f"a {status} result", lambda d: visible(d, f"#play-result .result[data-status={status}]"), timeout)


def scenario_invoke(d):
    q(d, "li[data-tool=calc_evaluate] h2 a").click()
    wait(d, "the playground", lambda d: visible(d, "#view-play [data-field=expression]"))
    assert Select(q(d, "#play-tool")).first_selected_option.text == "calc_evaluate"
    field = q(d, "#play-fields [data-field=expression]")
    field.send_keys("2*(3+4)^2")
    result = invoke_and_wait(d, "success")
    assert "98" in result.text, result.text
    shot(d, "03-playground-calc")
    # The form's value as raw JSON, edited there, and invoked from it.
    q(d, "#play-raw").click()
    raw = q(d, "#play-json")
    assert json.loads(raw.get_attribute("value")) == {"expression": "2*(3+4)^2"}
    raw.clear()
    raw.send_keys('{"expression": "6*7"}')
    result = invoke_and_wait(d, "success")
    wait(d, "42", lambda d: "42" in q(d, "#play-result").text)
    q(d, "#play-raw").click()
    assert q(d, "#play-fields [data-field=expression]").get_attribute("value") == "6*7"
    # An error with its code, the form submitted from the keyboard.
    field = q(d, "#play-fields [data-field=expression]")
    field.clear()
    field.send_keys("1/0", Keys.ENTER)
    err = wait(d, "an error", lambda d: visible(d, "#play-result .result[data-status=error]"))
    assert err.get_attribute("data-kind") == "invalid_input", err.text
    assert "422" in err.text and "division by zero" in err.text, err.text
    shot(d, "04-playground-error")
    ok("invoke")


def scenario_notebook(d):
    go(d, "#/play/notebook_execute")
    field = wait(d, "the notebook form", lambda d: visible(d, "#play-fields [data-field=code]"))
    assert field.tag_name == "textarea"
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 5, 4])\nplt.title('console')\nplt.show()\n6 * 7"
    d.execute_script("arguments[0].value = arguments[1]", field, code)
    invoke_and_wait(d, "success", timeout=180)
    img = wait(
        d,
        "the figure rendered",
        lambda d: next(
            (i for i in qs(d, "#play-result img") if d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i)),
            None,
        ),
    )
    width = d.execute_script("return arguments[0].naturalWidth", img)
    assert width >= 100, width
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
    shot(d, "05-notebook-image")
    ok("notebook")


def scenario_sessions(d):
    session = d.execute_script("return sessionStorage.getItem('toolhost.session')")
    assert session and session.startswith("console-"), session
    go(d, "#/sessions")
    row = wait(d, "the session listed", lambda d: visible(d, f"#sessions-list li[data-session='{session}']"))
    assert "idle" in row.text, "the admin list has the server's view: " + row.text
    row.find_element(By.XPATH, ".//button[text()='Open']").click()
    wait(d, "the workspace", lambda d: visible(d, "#ws-upload"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hello.txt")
        with open(path, "w") as f:
            f.write("hello from the browser\n")
        q(d, "#ws-file").send_keys(path)
        q(d, "#ws-dir").send_keys("notes")
        q(d, "#ws-upload button[type=submit]").click()
        wait(d, "the uploaded file in the tree", lambda d: visible(d, "li[data-path='notes/hello.txt']"))
    assert "Uploaded notes/hello.txt" in q(d, "#ws-upload .msg").text
    # An image for the form scenario: the first screenshot, into photos/.
    q(d, "#ws-file").send_keys(os.path.join(SHOTS, "01-wrong-token.png"))
    dir_ = q(d, "#ws-dir")
    dir_.clear()
    dir_.send_keys("photos")
    q(d, "#ws-upload button[type=submit]").click()
    wait(d, "the uploaded image in the tree", lambda d: visible(d, "li[data-path='photos/01-wrong-token.png']"))
    # Read it back through the API the console used, in the same session.
    text = d.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/tools/files_read/invoke', {method: 'POST', headers: {'content-type': 'application/json',
          'x-toolhost-session': arguments[0], authorization: 'Bearer ' + sessionStorage.getItem('toolhost.token')},
          body: JSON.stringify({params: {path: 'notes/hello.txt'}})}).then(r => r.text()).then(done, e => done(String(e)));""",
        session,
    )
    assert "hello from the browser" in text, text
    shot(d, "06-sessions")
    ok("sessions")


def scenario_form(d):
    """A form with an array of numbers, enums and optional strings
    (image_zoom_in), filled as a person would, checked as raw JSON, invoked;
    the image result rendered inline."""
    go(d, "#/play/image_zoom_in")
    path = wait(d, "the zoom-in form", lambda d: visible(d, "#play-fields [data-field=path]"))
    path.send_keys("photos/01-wrong-token.png")
    add = q(d, "fieldset[data-field=bbox_2d] > button")
    for v in ("40", "80", "420", "480"):
        add.click()
        ActionChains(d).send_keys(v).perform()  # the new item's field has the focus
    coords = Select(q(d, "#play-fields select[data-field=coordinates]"))
    assert [o.text for o in coords.options] == ["(unset)", "relative", "pixels"], [o.text for o in coords.options]
    coords.select_by_visible_text("relative")
    Select(q(d, "#play-fields select[data-field=format]")).select_by_visible_text("jpeg")
    q(d, "#play-fields [data-field=label]").send_keys("the prompt")
    q(d, "#play-raw").click()
    sent = json.loads(q(d, "#play-json").get_attribute("value"))
    want = {"path": "photos/01-wrong-token.png", "bbox_2d": [40, 80, 420, 480], "coordinates": "relative", "format": "jpeg", "label": "the prompt"}
    assert sent == want, sent
    q(d, "#play-raw").click()
    invoke_and_wait(d, "success")
    img = wait(
        d,
        "the zoomed image",
        lambda d: next((i for i in qs(d, "#play-result img") if d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i)), None),
    )
    assert "image/jpeg" in q(d, "#play-result figure").text
    d.execute_script("arguments[0].scrollIntoView({block: 'end'})", img)
    shot(d, "06b-playground-form-image")
    ok("form")


def scenario_hot_load(d):
    go(d, "#/plugins")
    wait(d, "the plugins table", lambda d: visible(d, "#plugins-table tr[data-plugin=calc][data-state=ready]"))
    assert visible(d, "#plugin-upload"), "the admin sees the upload form"
    d.execute_script("window.__samePage = 'yes'")
    # Dropped into the directory as the README advises: manifest, then the
    # component written aside and renamed into place.
    wasm = ARGS.extra_plugin
    toml = os.path.splitext(wasm)[0] + ".toml"
    if os.path.isfile(toml):
        shutil.copy(toml, os.path.join(ARGS.plugins_dir, "maths.toml"))
    tmp = os.path.join(ARGS.plugins_dir, ".maths.wasm.part")
    shutil.copy(wasm, tmp)
    os.rename(tmp, os.path.join(ARGS.plugins_dir, "maths.wasm"))
    wait(d, "maths ready in the table", lambda d: visible(d, "#plugins-table tr[data-plugin=maths][data-state=ready]"))
    wait(d, "the hot-load event", lambda d: "maths appeared" in q(d, "#events").text or "maths: compiling → ready" in q(d, "#events").text)
    assert d.execute_script("return window.__samePage") == "yes", "the page was not reloaded"
    shot(d, "07-plugins-hot-load")
    go(d, "#/tools")
    wait(d, "the new plugin's tool in the catalogue", lambda d: visible(d, "li[data-tool=maths_evaluate]"))
    # Delete it from the console (admin): two clicks, the second confirms.
    go(d, "#/plugins")
    # The table re-renders as the plugin's optimised build swaps in: each
    # click finds the button again (the armed delete is kept across renders).
    delete = "tr[data-plugin=maths] button.danger"
    wait(d, "maths' delete button", lambda d: (b := visible(d, delete)) and (b.click() or True))
    wait(d, "the confirmation", lambda d: q(d, delete).text == "Confirm delete")
    wait(d, "the confirming click", lambda d: q(d, delete).click() or True)
    wait(d, "maths gone", lambda d: not qs(d, "tr[data-plugin=maths]"))
    assert not os.path.exists(os.path.join(ARGS.plugins_dir, "maths.wasm"))
    assert "maths removed" in q(d, "#events").text or "maths deleted" in q(d, "#events").text
    ok("hot_load")


def scenario_pins(d):
    """A mounted MCP server rewrites a tool and adds one (tests/fixtures/mcp/
    rugpull.py): the plugins table says two are held, the admin reviews the
    pinned and the new definitions side by side and approves them."""
    d.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/tools/rug_turn/invoke', {method: 'POST', headers: {'content-type': 'application/json',
          authorization: 'Bearer ' + sessionStorage.getItem('toolhost.token')}, body: '{"params": {}}'})
          .then(r => r.text()).then(done, e => done(String(e)));"""
    )
    go(d, "#/plugins")
    wait(d, "the held tools in the table", lambda d: visible(d, "tr[data-plugin=rug] .badge.held"))
    assert q(d, "tr[data-plugin=rug] .badge.held").text == "2 held", q(d, "tr[data-plugin=rug] .badge.held").text
    q(d, "tr[data-plugin=rug] button.review").click()
    wait(d, "the review panel", lambda d: visible(d, "#pins-panel li[data-held=rug_greet]"))
    greet = q(d, "#pins-panel li[data-held=rug_greet]").text
    assert "Says hello to `name`." in greet and "id_rsa" in greet, greet
    assert "none: a new tool" in q(d, "#pins-panel li[data-held=rug_exfiltrate]").text
    shot(d, "07b-plugins-held-tools")
    q(d, "#pins-panel button.approve-all").click()
    wait(d, "nothing held", lambda d: "Nothing is held." in q(d, "#pins-panel").text)
    wait(d, "the badge gone", lambda d: not qs(d, "tr[data-plugin=rug] .badge.held"))
    assert "approved rug_exfiltrate, rug_greet" in q(d, "#events").text, q(d, "#events").text
    ok("pins")


def scenario_metrics(d):
    d.execute_async_script(
        """const done = arguments[arguments.length - 1];
        const call = (e) => fetch('/tools/calc_evaluate/invoke', {method: 'POST', headers: {'content-type': 'application/json',
          authorization: 'Bearer ' + sessionStorage.getItem('toolhost.token')}, body: JSON.stringify({params: {expression: e}})});
        (async () => { for (let i = 0; i < 20; i++) await call(i % 5 ? `${i}*${i}` : 'nope('); })().then(done, done);"""
    )
    go(d, "#/metrics")
    row = wait(
        d,
        "calc_evaluate's calls in the table",
        lambda d: (r := visible(d, "#metrics-table tr[data-tool=calc_evaluate]")) and int(r.find_element(By.CSS_SELECTOR, ".calls").text.replace(",", "")) >= 20 and r,
        timeout=30,
    )
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td")]
    assert int(cells[1]) >= 4, f"the errors are counted: {cells}"
    assert cells[2] != "–" and cells[3] != "–", f"p50 and p99: {cells}"
    row.find_element(By.CSS_SELECTOR, "button").click()
    wait(d, "the charts drawn", lambda d: len(qs(d, "#charts svg polyline, #charts svg circle")) >= 2)
    shot(d, "08-metrics")
    ok("metrics")


def scenario_keyboard(d):
    d.get(ARGS.url + "/ui/#/tools")
    wait(d, "the catalogue after a reload (the token kept for the tab)", lambda d: visible(d, "li[data-tool=calc_evaluate]"))
    # The skip link comes first in the tab order, and shows when focused.
    first = d.execute_script(
        "return [...document.querySelectorAll('a[href], button, input, select, textarea, [tabindex]')]"
        ".find(e => e.tabIndex >= 0 && !e.disabled).className"
    )
    assert first == "skip", first
    d.execute_script("document.querySelector('.skip').focus()")
    left = d.execute_script("return document.activeElement.getBoundingClientRect().left")
    assert left >= 0, f"the focused skip link is on screen: {left}"
    for _ in range(10):
        active = d.switch_to.active_element
        if active.get_attribute("data-view") == "plugins":
            break
        ActionChains(d).send_keys(Keys.TAB).perform()
    assert d.switch_to.active_element.get_attribute("data-view") == "plugins", "the Plugins tab is reachable by Tab"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    wait(d, "the plugins view by keyboard", lambda d: visible(d, "#view-plugins"))
    assert d.switch_to.active_element.get_attribute("id") == "plugins-h", "focus moves to the view's heading"
    # A visible focus ring on a button.
    outline = d.execute_script("const e = document.getElementById('token-button'); e.focus(); return getComputedStyle(e).outlineStyle")
    assert outline not in ("none", ""), outline
    ok("keyboard")


def scenario_narrow(d):
    viewport(d, 390, 844)
    for view, name in (("#/tools", "09-narrow-catalogue"), ("#/play/calc_evaluate", "10-narrow-playground"), ("#/plugins", "11-narrow-plugins"), ("#/metrics", "12-narrow-metrics")):
        go(d, view)
        time.sleep(0.4)
        if view.startswith("#/play"):
            wait(d, "the form", lambda d: visible(d, "#play-fields [data-field=expression]"))
            field = q(d, "#play-fields [data-field=expression]")
            field.clear()
            field.send_keys("sqrt(2)")
            invoke_and_wait(d, "success")
            time.sleep(0.2)
        overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{view} is wider than the screen by {overflow} px"
        shot(d, name)
    viewport(d, 1280, 800)
    ok("narrow")


def scenario_performance(d):
    # Weight: every byte the page loads, with the cache off (first visit).
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    d.get(ARGS.url + "/ui/")
    wait(d, "the catalogue", lambda d: visible(d, "li[data-tool=calc_evaluate]"))
    weight = d.execute_script(
        """const own = (e) => new URL(e.name).pathname.startsWith('/ui');
        return [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')]
          .filter(own).reduce((n, e) => n + e.decodedBodySize, 0);"""
    )
    figure("page_weight_bytes", weight)
    assert 0 < weight < 300 * 1024, weight

    def fcp():
        d.get(ARGS.url + "/ui/")
        return wait(
            d,
            "first-contentful-paint",
            lambda d: d.execute_script("const p = performance.getEntriesByName('first-contentful-paint')[0]; return p && p.startTime"),
        )

    cold = [fcp() for _ in range(5)]
    d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
    fcp()  # fill the cache
    warm = [fcp() for _ in range(5)]
    figure("fcp_ms_no_cache_median", round(statistics.median(cold), 1))
    figure("fcp_ms_warm_median", round(statistics.median(warm), 1))
    figure("fcp_ms_all", json.dumps({"no_cache": [round(x, 1) for x in cold], "warm": [round(x, 1) for x in warm]}))
    ok("performance")


def scenario_browser_log(d):
    bad = [
        e["message"]
        for e in d.get_log("browser")
        if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]
    ]
    assert not bad, "\n".join(bad)
    ok("browser_log")


def main():
    global ARGS, SHOTS
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--caller-token", required=True)
    p.add_argument("--admin-token", required=True)
    p.add_argument("--plugins-dir", required=True)
    p.add_argument("--extra-plugin", required=True)
    p.add_argument("--screenshots", required=True)
    p.add_argument("--notebook", action="store_true")
    p.add_argument("--pins", action="store_true", help="a toolkit `rug` mounts tests/fixtures/mcp/rugpull.py")
    ARGS = p.parse_args()
    SHOTS = ARGS.screenshots
    os.makedirs(SHOTS, exist_ok=True)
    started = time.monotonic()
    d = browser()
    figure("browser_start_s", round(time.monotonic() - started, 2))
    steps = [scenario_refused, scenario_sign_in, scenario_search, scenario_invoke]
    if ARGS.notebook:
        steps.append(scenario_notebook)
    steps += [scenario_sessions, scenario_form, scenario_hot_load]
    if ARGS.pins:
        steps.append(scenario_pins)
    steps += [scenario_metrics, scenario_keyboard, scenario_narrow, scenario_performance, scenario_browser_log]
    try:
        for step in steps:
            t = time.monotonic()
            step(d)
            figure(f"{step.__name__}_s", round(time.monotonic() - t, 2))
    except Exception:
        traceback.print_exc()
        try:
            shot(d, "failure")
            print("browser log:", json.dumps(d.get_log("browser"), indent=1)[:5000])
        except Exception:
            pass
        return 1
    finally:
        d.quit()
    print(f"console test: {len(steps)} scenarios in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
