#!/usr/bin/env python3
"""The measured inputs of docs/scaling.md, on this machine.

Run with `python3 tests/bench/scaling.py` after `make build plugins node-image`
(the release binary, target/plugins, the node image). Loopback only, bounded:
it starts its own server (calc + a cold shell toolkit) on a free port with a
temporary data directory, and removes it and its containers at the end.

Measures:
- memory per idle session: the server's RSS growth over IDLE_SESSIONS (2000)
  sessions, each opened by one wasm call (a workspace, no container);
- memory per active session: ACTIVE_SESSIONS (20) sessions each with a shell
  node: the server's RSS growth, each container's own memory (cgroup), each
  node's containerd-shim RSS, and the machine's used-memory growth;
- a node's start (create, start, driver ready) from the server's log.
Wasm calls per core come from `toolhost-bench paired` (the server's CPU time
per call), not from here.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402
IDLE = int(os.environ.get("IDLE_SESSIONS", "2000"))
ACTIVE = int(os.environ.get("ACTIVE_SESSIONS", "20"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def used_mib():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            info[k] = int(v.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 1024


def engine_rss_mib():
    """RSS of the main engine's dockerd and its containerd."""
    ps = subprocess.run(["ps", "-eo", "rss,comm"], capture_output=True, text=True).stdout
    return sum(
        int(l.split()[0]) for l in ps.splitlines()[1:] if l.split()[1] in ("dockerd", "containerd")
    ) / 1024


def engine_pids():
    ps = subprocess.run(["ps", "-eo", "pid,comm"], capture_output=True, text=True).stdout
    return [int(l.split()[0]) for l in ps.splitlines()[1:] if l.split()[1] in ("dockerd", "containerd")]


def cpu_s(pids):
    """User + system CPU seconds of `pids`."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def docker(*args):
    return subprocess.run(["docker", *args], capture_output=True, text=True).stdout


def main():
    work = tempfile.mkdtemp(prefix="scaling-")
    plugins, data = os.path.join(work, "plugins"), os.path.join(work, "data")
    os.makedirs(plugins)
    for f in ("calc.wasm", "calc.toml"):
        shutil.copy(os.path.join(ROOT, "target/plugins", f), plugins)
    shutil.copytree(os.path.join(ROOT, "plugins/shell"), os.path.join(plugins, "shell"))
    manifest = os.path.join(plugins, "shell/shell.toml")
    text = open(manifest).read()
    text = text.replace('scheduling = "hot"', 'scheduling = "cold"').replace(
        "max_containers = 32", f"max_containers = {max(64, ACTIVE + 8)}"
    )
    open(manifest, "w").write(text)
    log = open(os.path.join(work, "server.log"), "w")
    server = BenchServer(BIN, plugins, data, log=log, level="info")
    try:
        server.wait_ready()
        server.invoke("calc_evaluate", {"expression": "1+1"}, "warm")
        time.sleep(1)
        base = rss_kib(server.pid)

        started = time.time()
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: server.invoke("calc_evaluate", {"expression": "1+1"}, f"idle{i}"),
                    range(IDLE),
                )
            )
        idle_s = time.time() - started
        time.sleep(1)
        idle_rss = rss_kib(server.pid)
        per_idle = (idle_rss - base) / IDLE
        du = subprocess.run(
            ["du", "-sk", os.path.join(data, "workspaces")], capture_output=True, text=True
        ).stdout.split()
        disk_per_idle = int(du[0]) / IDLE if du else float("nan")
        print(f"idle sessions: {IDLE} opened in {idle_s:.1f} s by one calc call each")
        print(f"  server RSS {base} KiB -> {idle_rss} KiB: {per_idle:.1f} KiB per idle session")
        print(f"  workspace directories: {disk_per_idle:.1f} KiB of disk per session")

        used_before = used_mib()
        rss_before = rss_kib(server.pid)
        engine_before = engine_rss_mib()
        started = time.time()
        with ThreadPoolExecutor(4) as pool:
            results = list(
                pool.map(
                    lambda i: server.answer("shell_run", {"command": "echo hi"}, f"active{i}"),
                    range(ACTIVE),
                )
            )
        assert all(r["status"] == "success" for r in results), results
        active_s = time.time() - started
        time.sleep(2)
        engine_after = engine_rss_mib()
        rss_after = rss_kib(server.pid)
        used_after = used_mib()
        listed = docker(
            "ps", "--no-trunc", "--filter", "label=toolhost.toolkit=shell",
            "--format", '{{.ID}} {{.Label "toolhost.session"}}',
        ).split("\n")
        mine = [l.split()[0] for l in listed if l.strip().endswith(tuple(f" active{i}" for i in range(ACTIVE)))]
        cgroup = []
        for cid in mine:
            for path in (
                f"/sys/fs/cgroup/memory/docker/{cid}/memory.usage_in_bytes",
                f"/sys/fs/cgroup/docker/{cid}/memory.current",
            ):
                if os.path.exists(path):
                    cgroup.append(int(open(path).read()) / 2**20)
                    break
        shims = []
        ps = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
        for line in ps.splitlines():
            if "containerd-shim" in line and any(cid[:12] in line or cid in line for cid in mine):
                shims.append(int(line.split()[0]) / 1024)
        print(f"active sessions: {ACTIVE}, each with a shell node ({len(mine)} containers)")
        print(
            f"  server RSS +{(rss_after - rss_before) / ACTIVE:.0f} KiB per active session"
        )
        if cgroup:
            print(
                f"  container memory (cgroup, bash + driver + init): median {statistics.median(cgroup):.1f} MiB, max {max(cgroup):.1f} MiB"
            )
        if shims:
            print(f"  containerd-shim RSS: median {statistics.median(shims):.1f} MiB per node")
        print(
            f"  dockerd + containerd RSS +{(engine_after - engine_before) / ACTIVE:.2f} MiB per node"
        )
        print(
            f"  machine used memory +{(used_after - used_before) / ACTIVE:.1f} MiB per active session (all of the above, dockerd and containerd included)"
        )
        print(f"  {ACTIVE} nodes started in {active_s:.1f} s, 4 at a time: {ACTIVE / active_s:.1f} nodes/s")
        # CPU per shell call: the server's, and the engine's (every call's
        # bytes go through dockerd's attached exec stream).
        calls = 50 * ACTIVE // 10
        cpu0, eng0 = cpu_s([server.pid]), cpu_s(engine_pids())
        t0 = time.time()
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: server.answer("shell_run", {"command": "true"}, f"active{i % ACTIVE}"),
                    range(calls),
                )
            )
        wall = time.time() - t0
        cpu1, eng1 = cpu_s([server.pid]), cpu_s(engine_pids())
        print(
            f"  shell calls: {calls / wall:.0f}/s on 8 connections; per call: server CPU {1e3 * (cpu1 - cpu0) / calls:.2f} ms, dockerd + containerd CPU {1e3 * (eng1 - eng0) / calls:.2f} ms"
        )
        starts = []
        for line in open(os.path.join(work, "server.log")):
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            if "node started" in line:
                nums = dict(re.findall(r"(create_ms|start_ms|ready_ms)=(\d+)", line))
                if len(nums) == 3:
                    starts.append(sum(int(v) for v in nums.values()))
        if starts:
            print(
                f"  node start (create + start + driver ready), 4 at a time: median {statistics.median(starts):.0f} ms"
            )
    finally:
        server.stop(patience=30)
        left = docker("ps", "-aq", "--filter", "label=toolhost.toolkit=shell").split()
        shutil.rmtree(work, ignore_errors=True)
        if left:
            print(f"note: shell containers still on the engine (others'?): {len(left)}", file=sys.stderr)


if __name__ == "__main__":
    main()
