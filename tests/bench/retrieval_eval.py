#!/usr/bin/env python3
"""doc_retrieval's quality and speed (#23), through a running release server:

1. Quality: the labelled questions of tests/bench/retrieval_questions.jsonl
   (written by hand over the real documents of tests/fixtures/docs; each names
   the file and pages that answer it) asked with top_k 5; a hit is relevant
   when its file matches and, for paged documents, its page is one of those
   named. Reports recall@5 (a relevant hit among the five) and MRR (mean of
   1/rank of the first relevant hit) for keyword, and for vector and hybrid
   with the local model `make plugins` fetched (all-MiniLM-L6-v2, run in
   the sandbox), or EMBEDDINGS_URL (an OpenAI-compatible /v1/embeddings on
   127.0.0.1; EMBEDDINGS_MODEL names the model) when given.
2. Speed: a workspace of COPIES (default 23) copies of the documents' text,
   over 10,000 chunks, indexed once; then the median time of a keyword query
   as a whole call (loading the index, checking every file's size and time,
   ranking, reading the passages) over 20 queries, sequentially and under
   load (LOAD, default 4, clients asking at once, each its own session over
   its own copy of the workspace, 60 queries each).

    make build plugins && python3 tests/bench/retrieval_eval.py [--speed]

--speed: the speed part only (no quality run, no embeddings). DOC_WASM: the
component (default target/plugins/doc.wasm; another build for a before/after).
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402

BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
DOCS = os.path.join(ROOT, "tests/fixtures/docs")
EMBEDDINGS = os.environ.get("EMBEDDINGS_URL")
COPIES = int(os.environ.get("COPIES", "23"))
LOAD = int(os.environ.get("LOAD", "4"))
SPEED_ONLY = "--speed" in sys.argv[1:]
LOCAL = False

if not os.path.exists(BIN) or not os.path.exists(os.path.join(ROOT, "target/plugins/doc.wasm")):
    print("SKIPPED retrieval eval: build the release binary and the plugins first (make build plugins)")
    sys.exit(0)

work = tempfile.mkdtemp()
plugins = os.path.join(work, "plugins")
os.makedirs(plugins)
shutil.copy(os.environ.get("DOC_WASM", os.path.join(ROOT, "target/plugins/doc.wasm")), os.path.join(plugins, "doc.wasm"))
manifest = open(os.path.join(ROOT, "target/plugins/doc.toml")).read()
if EMBEDDINGS:
    host = re.match(r"https?://([^/]+)", EMBEDDINGS).group(1)
    model = os.environ.get("EMBEDDINGS_MODEL", "default")
    manifest = manifest.replace("[config]\n", f'[config]\nembeddings_url = "{EMBEDDINGS}"\nembeddings_model = "{model}"\n', 1)
    manifest = re.sub(r"\[http\]\n(#.*\n)*allow = \[\]", f'[http]\nallow = ["{host}"]', manifest)
else:
    # The local model that `make plugins` put beside the plugins.
    model = os.path.join(ROOT, "target/plugins/.models/all-minilm-l6-v2")
    if os.path.exists(os.path.join(model, "model.safetensors")):
        manifest = manifest.replace('dir = ".models/all-minilm-l6-v2"', f'dir = "{model}"')
        manifest = manifest.replace("[config]\n", '[config]\nembed_chunks_per_call = "32"\n', 1)
        LOCAL = True
open(os.path.join(plugins, "doc.toml"), "w").write(manifest)

data = os.path.join(work, "data")
server = BenchServer(BIN, plugins, data)


def search(session, params):
    return server.invoke("doc_retrieval", params, session)


def quality(questions):
    ws = os.path.join(data, "workspaces/eval")
    os.makedirs(ws)
    for n in os.listdir(DOCS):
        if os.path.isfile(os.path.join(DOCS, n)) and not n.endswith(".md"):
            shutil.copy(os.path.join(DOCS, n), ws)
    t = time.perf_counter()
    first = search("eval", {"query": "warm up", "mode": "keyword"})
    print(f"indexed {first['index']['files']} documents, {first['index']['chunks']} chunks in {time.perf_counter() - t:.2f} s")
    calls = 1
    while first["index"].get("pending_vectors", 0) > 0:
        first = search("eval", {"query": "warm up", "mode": "hybrid"})
        calls += 1
    if calls > 1 or EMBEDDINGS or LOCAL:
        print(f"embedded every chunk in {time.perf_counter() - t:.1f} s over {calls} calls "
              f"({'endpoint' if EMBEDDINGS else 'local all-MiniLM-L6-v2 in the sandbox'})")
    modes = ["keyword"] + (["vector", "hybrid"] if EMBEDDINGS or LOCAL else [])
    print(f"{len(questions)} questions, top 5")
    for mode in modes:
        recall, rr = 0, 0.0
        for q in questions:
            hits = search("eval", {"query": q["q"], "mode": mode, "top_k": 5})["results"]
            for rank, h in enumerate(hits, 1):
                if h["file"] == q["file"] and (not q["pages"] or h.get("page") in q["pages"]):
                    recall += 1
                    rr += 1 / rank
                    break
        n = len(questions)
        print(f"{mode:8} recall@5 {recall / n:.3f}  MRR {rr / n:.3f}")
    if not (EMBEDDINGS or LOCAL):
        print("vector, hybrid: not measured (no EMBEDDINGS_URL and no local model: make plugins)")


def speed(questions):
    """Keyword queries over 10,000+ chunks (the fixtures' text, copied), one
    client, then LOAD clients at once (a workspace each)."""
    refs = [os.path.join(DOCS, "ref", n) for n in os.listdir(os.path.join(DOCS, "ref"))]
    sessions = [f"big{c}" for c in range(max(LOAD, 1))]
    for name in sessions:
        big = os.path.join(data, "workspaces", name)
        os.makedirs(big)
        for i in range(COPIES):
            for r in refs:
                shutil.copy(r, os.path.join(big, f"{i:03}-{os.path.basename(r)}"))
    t = time.perf_counter()
    first = search(sessions[0], {"query": "warm up", "mode": "keyword"})
    chunks = first["index"]["chunks"]
    print(f"indexed {first['index']['files']} files, {chunks} chunks in {time.perf_counter() - t:.1f} s")
    for name in sessions[1:]:
        search(name, {"query": "warm up", "mode": "keyword"})

    def timed(session, qs):
        out = []
        for q in qs:
            t = time.perf_counter()
            search(session, {"query": q["q"], "mode": "keyword", "top_k": 5})
            out.append((time.perf_counter() - t) * 1000)
        return out

    times = timed(sessions[0], questions[:20])
    print(f"keyword query over {chunks} chunks, whole call: median {statistics.median(times):.1f} ms, "
          f"min {min(times):.1f} ms, max {max(times):.1f} ms")
    if LOAD > 1:
        qs = (questions * 2)[:60]
        with ThreadPoolExecutor(LOAD) as pool:
            t = time.perf_counter()
            runs = list(pool.map(lambda s: timed(s, qs), sessions))
            wall = time.perf_counter() - t
        loaded = [x for r in runs for x in r]
        loaded.sort()
        print(f"under load ({LOAD} clients at once, {len(loaded)} queries, {len(loaded) / wall:.0f}/s): "
              f"median {statistics.median(loaded):.1f} ms, p90 {loaded[int(len(loaded) * 0.9)]:.1f} ms, "
              f"max {loaded[-1]:.1f} ms")


try:
    server.wait_ready()
    questions = [json.loads(line) for line in open(os.path.join(ROOT, "tests/bench/retrieval_questions.jsonl"))]
    if not SPEED_ONLY:
        quality(questions)
    speed(questions)
finally:
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
