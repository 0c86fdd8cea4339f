"""Where a native invoke's server CPU goes: a release server of calc under
`wrk -t2 -c50` (POST /tools/calc_evaluate/invoke), its CPU per call read from
/proc, and `perf record --call-graph=dwarf` for a few seconds of it; every
sample is put in the first bucket (in the order below) one of its frames
matches, and each bucket's share is shown with the microseconds it makes of
a call. Needs `perf` and `wrk` (Debian: linux-perf, wrk). Loopback only,
bounded (about four minutes, most of it `perf script` unwinding).

    cargo build --release -p toolhost && make plugins
    python3 tests/bench/profile_invoke.py
"""

import collections
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer, calc_under_wrk  # noqa: E402

BUCKETS = [
    ("wasm: sandbox torn down (store dropped, memory reset)", r"drop_in_place<wasmtime::runtime::store::StoreInner"),
    ("wasm: sandbox made (store, WASI context, instance)",
     r"instantiate_async|Instantiator|allocate_instance|Store<T>::new|WasiCtxBuilder|CallState::new|"
     r"MemoryOutputPipe|ModuleRegistry|lookup_vmdef|GuestIndices|trampoline_ptrs|OwnedImports|make_fiber|"
     r"needs_startup|PoolingInstanceAllocator|ComponentInstance"),
    ("wasm: the call itself (guest code, fuel, lifting)", r"call_call|call_impl|fiber|Func::call_raw"),
    ("wasm: the rest of the toolkit's call", r"WasmToolkit as toolhost_core::backend::Toolkit>::invoke"),
    ("dispatch (lookup, policy, admission, schema, stats, metrics)", r"Dispatcher::call_one|Dispatcher::dispatch"),
    ("session (opened, id made, dropped)", r"native::open_session|Held as core::ops::drop"),
    ("response body (JSON built and written)", r"success_body|Json<T> as axum_core::response::into_response"),
    ("request body (read, JSON parsed)", r"FromRequest<S> for bytes|JsonBody|serde_json::de"),
    ("handler: the rest (extractors, headers)", r"axum::handler::Handler<\(M,T1"),
    ("socket write (kernel: loopback delivery, waking the client)", r"writev"),
    ("socket read", r"__libc_recv|poll_read_priv|recvfrom"),
    ("HTTP/1 framing, routing, request id and trace layers, front service",
     r"hyper::|axum::|tower|toolhost_surfaces::front"),
    ("tokio: scheduling, timers, waking, I/O driver", r"tokio::|mio::|epoll|futex|schedule"),
]
OTHER = "other (kernel entry and exit, allocator outside the above)"


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    for tool in ("perf", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"profile_invoke.py: `{tool}` is not installed")
    work, plugins, lua = calc_under_wrk("profile-invoke-")
    server = BenchServer(BIN, plugins, os.path.join(work, "data"))
    try:
        server.wait_ready()
        url = f"{server.base}/tools/calc_evaluate/invoke"
        wrk = ["wrk", "-t2", "-c50", "-s", lua]
        subprocess.run(wrk + ["-d2s", url], check=True, capture_output=True)
        before = cpu_ticks(server.pid)
        out = subprocess.run(wrk + ["-d6s", url], check=True, capture_output=True, text=True).stdout
        spent = cpu_ticks(server.pid) - before
        calls = int(re.search(r"(\d+) requests in", out).group(1))
        per_call = spent / os.sysconf("SC_CLK_TCK") * 1e6 / calls
        print(f"server CPU per invoke: {per_call:.1f} us ({calls} calls in 6 s)")
        data = os.path.join(work, "perf.data")
        load = subprocess.Popen(wrk + ["-d10s", url], stdout=subprocess.DEVNULL)
        time.sleep(2)
        subprocess.run(["perf", "record", "-q", "-F", "500", "--call-graph=dwarf,32768", "-p",
                        str(server.pid), "-o", data, "--", "sleep", "5"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load.wait()
        script = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], check=True,
                                capture_output=True, text=True).stdout
    finally:
        server.stop()
    samples, frames = [], []
    for line in script.splitlines():
        if not line.strip():
            if frames:
                samples.append(frames)
            frames = []
            continue
        parts = line.strip().split(" ", 1)
        frames.append(parts[1] if len(parts) > 1 else "?")
    if frames:
        samples.append(frames)
    counts = collections.Counter()
    patterns = [(name, re.compile(p)) for name, p in BUCKETS]
    for frames in samples:
        name = next((n for n, p in patterns if any(p.search(f) for f in frames)), OTHER)
        counts[name] += 1
    print(f"{len(samples)} samples")
    print("| where | share | per call |\n|---|---:|---:|")
    for name in [n for n, _ in BUCKETS] + [OTHER]:
        share = counts[name] / len(samples)
        print(f"| {name} | {share * 100:.1f} % | {share * per_call:.1f} us |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
