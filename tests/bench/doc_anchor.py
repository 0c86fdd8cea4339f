#!/usr/bin/env python3
"""The doc plugin against its anchors on the same real documents in one run
(#23): `doc_parser` through a running release server over loopback against
poppler's `pdftotext` (PDF) and `pandoc -t plain` (DOCX), each document read
RUNS times (default 5) by both, alternating. Prints, per document, the median
times, their ratio (ours / anchor) and the text similarity of the two outputs
(tests/bench/textsim.py: word-sequence ratio and bag-of-words F1).

    make build plugins && python3 tests/bench/doc_anchor.py

Skips, saying why, when pdftotext or pandoc is missing
(apt-get install poppler-utils pandoc). TOOLHOST_BIN: the server binary
(default target/release/toolhost); DOC_WASM: the component (default
target/plugins/doc.wasm; another build for a before/after)."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402
from textsim import similarity  # noqa: E402

RUNS = int(os.environ.get("RUNS", "5"))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
DOCS = os.path.join(ROOT, "tests/fixtures/docs")


def skip(why):
    print(f"SKIPPED doc anchor: {why}")
    sys.exit(0)


for tool, package in (("pdftotext", "poppler-utils"), ("pandoc", "pandoc")):
    if not shutil.which(tool):
        skip(f"{tool} is missing (apt-get install {package})")
if not os.path.exists(BIN):
    skip(f"{BIN} is missing (make build)")
if not os.path.exists(os.path.join(ROOT, "target/plugins/doc.wasm")):
    skip("target/plugins/doc.wasm is missing (make plugins)")

work = tempfile.mkdtemp()
plugins = os.path.join(work, "plugins")
os.makedirs(plugins)
shutil.copy(os.environ.get("DOC_WASM", os.path.join(ROOT, "target/plugins/doc.wasm")), os.path.join(plugins, "doc.wasm"))
shutil.copy(os.path.join(ROOT, "target/plugins/doc.toml"), plugins)
workspace = os.path.join(work, "data/workspaces/bench")
os.makedirs(workspace)
names = sorted(n for n in os.listdir(DOCS) if n.endswith((".pdf", ".docx")) and not n.startswith("par-"))
for n in names:
    shutil.copy(os.path.join(DOCS, n), workspace)

server = BenchServer(BIN, plugins, os.path.join(work, "data"))


def call(path):
    result = server.invoke("doc_parser", {"path": path, "max_chars": 200000}, "bench", timeout=120)
    return "\n".join(s["text"] for s in result["sections"]), result.get("next_offset")


try:
    server.wait_ready()
    call(names[0])  # the first call instantiates the component
    print(f"{'document':34} {'ours ms':>8} {'anchor ms':>9} {'ratio':>6} {'sequence':>8} {'words':>6}")
    ratios, seqs, f1s = [], [], []
    for n in names:
        anchor = "pdftotext" if n.endswith(".pdf") else "pandoc"
        path = os.path.join(workspace, n)
        cmd = [anchor, path, "-"] if anchor == "pdftotext" else ["pandoc", "-t", "plain", "--wrap=none", path]
        ours_t, theirs_t = [], []
        for _ in range(RUNS):
            t = time.perf_counter()
            ours, more = call(n)
            ours_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            theirs = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            theirs_t.append(time.perf_counter() - t)
        if more is not None:
            print(f"  ({n}: longer than one 200000-character window; similarity on the first)")
        seq, f1 = similarity(ours, theirs)
        a, b = statistics.median(ours_t) * 1000, statistics.median(theirs_t) * 1000
        ratios.append(a / b)
        seqs.append(seq)
        f1s.append(f1)
        print(f"{n + ' (' + anchor + ')':34} {a:8.1f} {b:9.1f} {a / b:6.2f} {seq:8.3f} {f1:6.3f}")
    print(
        f"median ratio {statistics.median(ratios):.2f}, median sequence similarity "
        f"{statistics.median(seqs):.3f}, median word F1 {statistics.median(f1s):.3f} over {len(names)} documents"
    )
finally:
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
