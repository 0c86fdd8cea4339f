"""How long a status change made through one replica takes to show on
another: two toolhost servers on one throwaway PostgreSQL cluster
(tests/pg/cluster.sh), N changes of calc_evaluate's status through A, each
timed from the PUT's start on A until B's GET /tools/calc_evaluate shows it
(polled every millisecond). Loopback only; stops by itself.

    python3 tests/pg/propagation.py target/release/toolhost 200
"""
import json, os, statistics, subprocess, sys, tempfile, time, urllib.request, socket, shutil

BIN, N = os.path.abspath(sys.argv[1]), int(sys.argv[2])
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
pgdir = tempfile.mkdtemp()
url = subprocess.check_output([f"{REPO}/tests/pg/cluster.sh", "start", pgdir, str(port())], text=True).strip()
plugins = tempfile.mkdtemp()
shutil.copy(f"{REPO}/target/plugins/calc.wasm", plugins)
procs = []
bases = []
try:
    for _ in range(2):
        data = tempfile.mkdtemp(); p = port()
        cfg = os.path.join(data, "t.toml")
        open(cfg, "w").write(f'[registry]\nurl = "{url}"\n[auth]\nadmin_token = "admin-admin-admin-admin"\n')
        procs.append(subprocess.Popen([BIN, "serve", "--plugins", plugins, "--data", data, "--config", cfg, "--bind", f"127.0.0.1:{p}"], stderr=subprocess.DEVNULL))
        bases.append(f"http://127.0.0.1:{p}")
    for b in bases:
        for _ in range(300):
            try:
                urllib.request.urlopen(b + "/health/ready"); break
            except Exception: time.sleep(0.05)
    def status(b):
        return json.load(urllib.request.urlopen(b + "/tools/calc_evaluate"))["status"]
    def put(b, s):
        r = urllib.request.Request(b + "/tools/calc_evaluate/status", data=json.dumps({"status": s}).encode(), method="PUT",
            headers={"authorization": "Bearer admin-admin-admin-admin", "content-type": "application/json"})
        urllib.request.urlopen(r).read()
    times = []
    for i in range(N):
        want = "inactive" if i % 2 == 0 else "active"
        t0 = time.perf_counter(); put(bases[0], want)
        while status(bases[1]) != want:
            time.sleep(0.001)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    print(f"{N} changes: p50 {statistics.median(times):.1f} ms, p99 {times[int(0.99*(N-1))]:.1f} ms, max {times[-1]:.1f} ms (from the PUT's start on A to B showing it)")
finally:
    for p in procs: p.terminate(); p.wait()
    subprocess.call([f"{REPO}/tests/pg/cluster.sh", "stop", pgdir])
