#!/usr/bin/env python3
"""`make bench`: run the benchmarks and write what they printed into
docs/benchmarks.md, each part under its own heading with the command that
made it, how long it ran and whether it passed, below a header naming the
machine, the date and the commit. Each script prints toolhost's figure and
its peer's (direct HTTP, the MCP server straight, pdftotext, ImageMagick, a
bare route of the same server) measured side by side in the same run; a
part whose peer or tool is missing here says SKIPPED and why.

    make bench                                   # every part
    BENCH_PARTS=image,retrieval make bench       # some parts; the others' sections stay
    python3 tests/bench/report.py --list         # the parts
    python3 tests/bench/report.py --self-test    # the page splicing, no benchmark run

Only the generated block of docs/benchmarks.md (between its `make bench`
markers) is rewritten; the prose around it is kept. Loopback only, each part
bounded by its own settings and by PART_TIMEOUT seconds (default 1800).
"""

import datetime
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGE = os.path.join(ROOT, "docs/benchmarks.md")
BEGIN = "<!-- make bench: generated from here (tests/bench/report.py); edits below are overwritten -->"
END = "<!-- make bench: generated up to here -->"
BENCH = "target/release/toolhost-bench"
HTTPAPI_PY = "target/venvs/httpapi/bin/python"

# name, what it compares, the command (run from the repository root).
PARTS = [
    ("invoke", "a native wasm call against a bare route of the same server (`GET /health`), "
     "sequential and under load, per surface; in-process dispatch", [BENCH, "invoke"]),
    ("profile", "where a native invoke's server CPU goes (wrk + perf), invoke/health ratio and p99",
     ["python3", "tests/bench/profile_invoke.py"]),
    ("startup", "process start to the first `/health`, to every shipped plugin ready, and to every one on its optimised (Cranelift) build",
     [BENCH, "startup"]),
    ("hotload", "a component dropped in to its first call served; compile cache cold and warm",
     [BENCH, "hotload"]),
    ("pyswap", "an 18 MB Python plugin's hot swap: dropped in, and built with the server's key (`toolhost build --cache-key`)",
     [HTTPAPI_PY, "tests/bench/pyswap.py", "--swaps", "5", "--pause", "12"]),
    ("api", "an API toolkit's call against the same HTTP request straight (toolhost-bench's Rust client)",
     [BENCH, "api"]),
    ("api-httpx", "the same from a plain Python client (httpx, one keep-alive client per path)",
     [HTTPAPI_PY, "tests/bench/api_httpx.py"]),
    ("gateway", "an MCP server's `tools/call` straight against through toolhost's `/mcp`",
     [BENCH, "gateway"]),
    ("languages", "per plugin language: component size, load, a trivial call's latency and fuel",
     [BENCH, "languages"]),
    ("nodes", "Docker nodes: first shell call (hot pool, cold), round trip, notebook cell, browser",
     [BENCH, "nodes"]),
    ("services", "a service toolkit's cold start against a bare `docker run`; a warm call against straight",
     [BENCH, "services"]),
    ("mcp-sessions", "what an MCP session costs in memory and whether closing it gives it back",
     [BENCH, "mcp-sessions"]),
    ("registry", "a call with the SQLite and the PostgreSQL registry; two replicas under load",
     [BENCH, "registry"]),
    ("written", "an MCP call with 0 / 10 / 1,000 / 10,000 files in the session workspace",
     ["python3", "tests/bench/written_walk.py"]),
    ("subscribed", "how soon an MCP client subscribed to a workspace file hears it changed",
     ["python3", "tests/bench/subscribed.py"]),
    ("catalog", "a call, a lookup and the lists with 10 / 1,000 / 10,000 tools",
     ["python3", "tests/bench/scale_tools.py"]),
    ("documents", "doc_parser against poppler's pdftotext and pandoc on the same documents",
     ["python3", "tests/bench/doc_anchor.py"]),
    ("image", "image_resize and image_compress against ImageMagick's convert on the same photos",
     ["tests/bench/image_anchor.sh"]),
    ("retrieval", "doc_retrieval's keyword query over 10,000+ chunks, alone and under load",
     ["python3", "tests/bench/retrieval_eval.py", "--speed"]),
    ("binary", "the release binary's size and its split debug file",
     ["sh", "-c", "ls -l target/release/toolhost target/release/toolhost.debug | awk '{printf \"%s %.1f MB\\n\", $9, $5/1e6}'"]),
]


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(open("/proc/meminfo").readline().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    os_name = platform.system()
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{os_name}, {os.cpu_count()} cores ({cpu}){mem}, Linux {platform.release()}"


def commit():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_part(name, what, command, timeout):
    """The part's section: heading, command, duration, outcome, output."""
    started = time.monotonic()
    print(f"== {name}: {' '.join(command)}", flush=True)
    try:
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        output, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        output, code = output + f"\n(stopped after {timeout} s)", "timeout"
    except OSError as e:
        output, code = str(e), "not run"
    took = time.monotonic() - started
    sys.stdout.write(output)
    # A server's coloured log lines, as text.
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    outcome = "ok" if code == 0 else f"failed ({code})"
    if code == 0 and re.search(r"^SKIPPED", output, re.M):
        outcome = "skipped"
    lines = output.rstrip().splitlines()
    if len(lines) > 120:
        lines = lines[:20] + [f"... ({len(lines) - 120} lines left out) ..."] + lines[-100:]
    body = "\n".join(lines).replace("```", "'''")
    return (f"<!-- part:{name} -->\n### {name}\n\n{what}.\n\n"
            f"`{' '.join(command)}` — {outcome}, {took:.0f} s, {datetime.date.today().isoformat()}\n\n"
            f"```text\n{body}\n```\n<!-- end:{name} -->\n"), outcome


def sections(block):
    """The parts' sections of a generated block: name -> text."""
    found = {}
    for m in re.finditer(r"<!-- part:([\w-]+) -->\n.*?<!-- end:\1 -->\n", block, re.S):
        found[m.group(1)] = m.group(0)
    return found


def splice(page, header, new_sections, order):
    """`page` with its generated block rewritten: `header`, then every part
    in `order`, new sections replacing old ones, old ones kept otherwise."""
    if BEGIN in page and END in page:
        before, rest = page.split(BEGIN, 1)
        old, after = rest.split(END, 1)
    else:
        before, old, after = page.rstrip() + "\n\n## Figures (`make bench`)\n\n", "", "\n"
    kept = sections(old)
    kept.update(new_sections)
    parts = [kept[n] for n in order if n in kept]
    block = "\n" + header + "\n" + "\n".join(parts)
    return before + BEGIN + block + END + after


def self_test():
    page = "# B\n\nprose\n"
    one = splice(page, "h1\n", {"a": "<!-- part:a -->\nA1\n<!-- end:a -->\n"}, ["a", "b"])
    assert one.startswith("# B\n\nprose\n") and "A1" in one and one.count(BEGIN) == 1, one
    two = splice(one + "after\n", "h2\n", {"b": "<!-- part:b -->\nB1\n<!-- end:b -->\n"}, ["a", "b"])
    assert "A1" in two and "B1" in two and "h2" in two and "h1" not in two, two
    assert two.index("A1") < two.index("B1") and two.rstrip().endswith("after"), two
    three = splice(two, "h3\n", {"a": "<!-- part:a -->\nA2\n<!-- end:a -->\n"}, ["a", "b"])
    assert "A2" in three and "A1" not in three and "B1" in three, three
    assert three.count(BEGIN) == 1 and three.count(END) == 1, three
    print("report self-test: the generated block is spliced, kept and replaced as expected")


def main():
    if "--self-test" in sys.argv:
        return self_test()
    if "--list" in sys.argv:
        for name, what, command in PARTS:
            print(f"{name:10} {' '.join(command)}\n           {what}")
        return
    wanted = [p for p in os.environ.get("BENCH_PARTS", "").split(",") if p]
    unknown = set(wanted) - {p[0] for p in PARTS}
    if unknown:
        sys.exit(f"unknown BENCH_PARTS {sorted(unknown)}; --list names them")
    timeout = int(os.environ.get("PART_TIMEOUT", "1800"))
    new, outcomes = {}, {}
    for name, what, command in PARTS:
        if wanted and name not in wanted:
            continue
        new[name], outcomes[name] = run_part(name, what, command, timeout)
    header = (f"Generated by `make bench` on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} "
              f"at commit {commit()}, on {machine()}. Each part below shows its command, outcome, "
              f"duration and date (parts not re-run keep their last run's).\n")
    page = open(PAGE).read()
    open(PAGE, "w").write(splice(page, header, new, [p[0] for p in PARTS]))
    print("\n" + "\n".join(f"{n:10} {o}" for n, o in outcomes.items()))
    print(f"docs/benchmarks.md: {len(new)} part(s) written")
    if any(o.startswith("failed") for o in outcomes.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
