"""`make test`'s cargo-test phase: every test binary of the workspace, run in
lanes side by side instead of one after another as `cargo test` runs them.

A test binary spends much of its time waiting (servers starting, Docker,
componentizers, the network of its own fakes): run one after another, the
binaries kept 1.09 of the two cores busy on average. Each lane takes the longest binary
still waiting (their last durations, kept in target/test-times.txt; the
committed tests/test-times.txt on a fresh checkout), so the long ones start
first and the short ones fill in at the end. A binary's output is printed
whole when it ends, headed as cargo heads it, and the failures are listed
again last (where a log cut to its tail still shows them). The doc tests run
as one more job (`cargo test --doc`).

A test binary whose source says `lanes: alone` (one that stops the Docker
daemon under the others, say) runs first, with nothing beside it; two whose
sources say `lanes: heavy` (both cores for minutes, with waits bounded in
time) never run side by side. A binary that failed beside another is run
once more by itself: passing alone, it is reported as RACED (a test to fix,
named loudly) and does not fail the phase; failing again, it fails it.

    python3 tests/lanes.py [--lanes N] [cargo args...]   # builds nothing new:
                                                         # `cargo test --no-run` first
    python3 tests/lanes.py --self-test

Each binary runs as cargo runs it: from its package's directory, with its
package's CARGO_MANIFEST_DIR, CARGO_PKG_NAME and CARGO_PKG_VERSION. Exit
status 0 when every binary passed, 101 (cargo's) otherwise.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "target" / "test-times.txt"
COMMITTED_TIMES = ROOT / "tests" / "test-times.txt"
LOGS = ROOT / "target" / "test-logs"


class Job:
    """A test binary (or the doc tests): how to run it and what it did."""

    def __init__(self, name, argv, cwd, env, title, alone=False, heavy=False):
        self.name = name
        self.alone = alone
        self.heavy = heavy
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.title = title
        self.status = None
        self.seconds = 0.0
        self.output = ""


def binaries(cargo_args):
    """The test binaries `cargo test` would run, from its build messages (a
    no-op build after the build phase)."""
    cmd = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"tests/lanes.py: {' '.join(cmd)} failed ({out.returncode})")
    packages = {}
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True).stdout)
    for p in meta["packages"]:
        packages[p["id"]] = p
    jobs = []
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        package = packages[msg["package_id"]]
        target = msg["target"]
        kind = target["kind"][0]
        name = f"{package['name']}::{target['name']}" + ("" if kind == "test" else f"[{kind}]")
        src = os.path.relpath(target["src_path"], Path(package["manifest_path"]).parent)
        exe = os.path.relpath(msg["executable"], ROOT)
        title = f"unittests {src}" if kind != "test" else src
        env = dict(os.environ,
                   CARGO_MANIFEST_DIR=str(Path(package["manifest_path"]).parent),
                   CARGO_PKG_NAME=package["name"], CARGO_PKG_VERSION=package["version"])
        source = Path(target["src_path"]).read_text() if kind == "test" else ""
        jobs.append(Job(name, [msg["executable"]], Path(package["manifest_path"]).parent, env,
                        f"Running {title} ({exe})", "lanes: alone" in source,
                        "lanes: heavy" in source))
    return jobs


def known_times():
    """Each binary's last duration: this checkout's last run's, else the
    committed ones."""
    for path in (TIMES, COMMITTED_TIMES):
        if path.exists():
            times = {}
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    times[parts[0]] = float(parts[1])
            return times
    return {}


def order(jobs, times):
    """Longest first; a binary never timed (new) goes first of all: its
    length is unknown, and a long one started last would end the run alone."""
    return sorted(jobs, key=lambda j: (j.name in times, -times.get(j.name, 0.0), j.name))


def run_job(job):
    LOGS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(job.argv, cwd=job.cwd, env=job.env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    job.seconds = time.monotonic() - started
    job.status = done.returncode
    job.output = done.stdout.decode(errors="replace")
    safe = job.name.replace("::", "-").replace("/", "-")
    (LOGS / f"{safe}.log").write_text(job.output)


def ended_line(job, where):
    """A job's heading when it ends, its output after it."""
    mark = "" if job.status == 0 else f", FAILED (exit {job.status})"
    return f"     {job.title} [{where}, {job.seconds:.1f} s{mark}]\n{job.output}"


def run(jobs, lanes, report=print):
    """Runs the jobs that must be alone one by one, then the others in
    `lanes` threads, each taking the next waiting job (passing over a heavy
    one while another heavy one runs); reports each job when it ends.
    Returns the jobs as they ended."""
    ended = []
    for job in [j for j in jobs if j.alone]:
        run_job(job)
        ended.append(job)
        report(ended_line(job, "alone"))
    waiting = [j for j in jobs if not j.alone]
    heavy_running = [False]
    turn = threading.Condition()

    def take():
        """The next job this lane may start, None when none is left."""
        with turn:
            while waiting:
                for job in waiting:
                    if not (job.heavy and heavy_running[0]):
                        waiting.remove(job)
                        heavy_running[0] |= job.heavy
                        return job
                turn.wait()  # only heavy ones left, one running
            return None

    def lane(number):
        while (job := take()) is not None:
            run_job(job)
            with turn:
                if job.heavy:
                    heavy_running[0] = False
                turn.notify_all()
                ended.append(job)
                report(ended_line(job, f"lane {number}"))

    threads = [threading.Thread(target=lane, args=(n + 1,)) for n in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ended


def failed_lines(output):
    """The lines of a test binary's output naming its failed tests."""
    return [line for line in output.splitlines()
            if line.startswith("test ") and line.endswith("FAILED")
            or line.startswith("error:") or "panicked at" in line][:20]


def main(argv):
    lanes = int(os.environ.get("TEST_LANES", "2"))
    if argv[:1] == ["--lanes"]:
        lanes, argv = int(argv[1]), argv[2:]
    jobs = binaries(argv)
    jobs.append(Job("doc-tests", ["cargo", "test", "--doc", *argv], ROOT, dict(os.environ),
                    "Doc-tests (cargo test --doc)"))
    times = known_times()
    print(f"[lanes] {len(jobs)} jobs, {lanes} at a time, longest first", flush=True)
    started = time.monotonic()
    ended = run(order(jobs, times), lanes, report=lambda text: print(text, flush=True))
    wall = time.monotonic() - started
    TIMES.write_text("".join(f"{j.name} {j.seconds:.1f}\n" for j in sorted(ended, key=lambda j: j.name)))
    busy = sum(j.seconds for j in ended)
    print(f"[lanes] {len(ended)} jobs, {busy:.1f} s of binaries' time in {wall:.1f} s "
          f"({lanes} at a time); longest:")
    for j in sorted(ended, key=lambda j: -j.seconds)[:8]:
        print(f"[lanes]   {j.seconds:7.1f} s {j.name}")
    failed = [j for j in ended if j.status != 0]
    for j in failed:
        print(f"[lanes] FAILED {j.name} (exit {j.status}; whole output in target/test-logs/)")
        for line in failed_lines(j.output):
            print(f"[lanes]   {line[:240]}")
    if lanes > 1:
        failed = alone_again(failed, report=lambda text: print(text, flush=True))
    return 101 if failed else 0


def alone_again(failed, report=print):
    """Runs each binary that failed beside another once more by itself: one
    that passes alone raced the load (a bounded wait, a shared thing) and is
    named as such, loudly, to be fixed; one that fails again failed. One that
    ran alone already stays failed. Returns the ones that failed alone."""
    still = [job for job in failed if job.alone]
    for job in failed:
        if job.alone:
            continue
        first = job.output
        run_job(job)
        if job.status == 0:
            report(f"[lanes] RACED {job.name}: failed beside another binary, passed alone "
                   f"({job.seconds:.1f} s); its failing run:\n{first}")
        else:
            report(f"[lanes] FAILED {job.name} alone too (exit {job.status}):\n{job.output}")
            still.append(job)
    return still


def self_test():
    """The scheduling and the verdict, with shell commands for binaries."""
    def job(name, script):
        return Job(name, ["sh", "-c", script], ROOT, dict(os.environ), f"Running {name}")

    times = {"a": 5.0, "b": 1.0}
    jobs = [job("b", "echo b"), job("new", "echo new"), job("a", "echo a")]
    assert [j.name for j in order(jobs, times)] == ["new", "a", "b"], "longest first, new before"
    # Two lanes: the two sleeps overlap (the run takes one sleep, not two).
    # One that must be alone runs before the others start (its mark file is
    # there before they look, and gone when they do).
    mark = ROOT / "target" / "lanes-self-test.mark"
    mark.unlink(missing_ok=True)
    lone = job("lone", f"touch {mark}; sleep 0.3; rm {mark}")
    lone.alone = True
    started = time.monotonic()
    seen = []
    ended = run([job("s1", f"test ! -e {mark} && sleep 1 && echo one"),
                 job("s2", f"test ! -e {mark} && sleep 1 && echo two"),
                 lone, job("bad", "echo 'test x ... FAILED'; exit 3")], 2, report=seen.append)
    took = time.monotonic() - started - 0.3
    assert took < 1.9, f"two lanes ran one after the other ({took:.1f} s)"
    assert {j.name: j.status for j in ended} == {"s1": 0, "s2": 0, "bad": 3, "lone": 0}, \
        [(j.name, j.status) for j in ended]
    assert ended[0].name == "lone"
    # Two heavy ones never overlap: one waits, and a light one runs beside.
    heavy = [job("h1", f"test ! -e {mark}.h && touch {mark}.h && sleep 0.5; s=$?; rm -f {mark}.h; exit $s"),
             job("h2", f"test ! -e {mark}.h && touch {mark}.h && sleep 0.5; s=$?; rm -f {mark}.h; exit $s"),
             job("light", "sleep 0.2")]
    for j in heavy[:2]:
        j.heavy = True
    ended = run(heavy, 2, report=seen.append)
    assert {j.name: j.status for j in ended} == {"h1": 0, "h2": 0, "light": 0}, \
        [(j.name, j.status) for j in ended]
    assert [j.name for j in ended] == ["light", "h1", "h2"], [j.name for j in ended]
    # A binary failing only beside another is run alone again and passes;
    # one failing alone too stays failed.
    shy = job("shy", f"sleep 0.2; test ! -e {mark}.b")
    busy = job("busy", f"touch {mark}.b; sleep 0.5; rm {mark}.b")
    broken = job("broken", "exit 1")
    ended = run([shy, busy, broken], 2, report=seen.append)
    assert shy.status != 0 and broken.status != 0, [(j.name, j.status) for j in ended]
    lone.status = 1  # failed alone already: not run again
    assert [j.name for j in alone_again([shy, broken, lone], report=seen.append)] == ["lone", "broken"]
    assert any(s.startswith("[lanes] RACED shy") for s in seen), seen
    assert any("FAILED (exit 3)" in s and "test x ... FAILED" in s for s in seen), seen
    assert failed_lines("ok\ntest x ... FAILED\ntest y ... ok\n") == ["test x ... FAILED"]
    print("tests/lanes.py: self-test passed")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(main(sys.argv[1:]))
