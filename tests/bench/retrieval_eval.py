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
   ranking, reading the passages) over 20 queries.

    make build plugins && python3 tests/bench/retrieval_eval.py
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402

BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
DOCS = os.path.join(ROOT, "tests/fixtures/docs")
EMBEDDINGS = os.environ.get("EMBEDDINGS_URL")
COPIES = int(os.environ.get("COPIES", "23"))
LOCAL = False

if not os.path.exists(BIN) or not os.path.exists(os.path.join(ROOT, "target/plugins/doc.wasm")):
    print("SKIPPED retrieval eval: build the release binary and the plugins first (make build plugins)")
    sys.exit(0)

work = tempfile.mkdtemp()
plugins = os.path.join(work, "plugins")
os.makedirs(plugins)
shutil.copy(os.path.join(ROOT, "target/plugins/doc.wasm"), plugins)
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


try:
    server.wait_ready()
    ws = os.path.join(data, "workspaces/eval")
    os.makedirs(ws)
    for n in os.listdir(DOCS):
        if os.path.isfile(os.path.join(DOCS, n)) and not n.endswith(".md"):
            shutil.copy(os.path.join(DOCS, n), ws)
    questions = [json.loads(line) for line in open(os.path.join(ROOT, "tests/bench/retrieval_questions.jsonl"))]
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

    # Speed over 10,000+ chunks: the fixtures' text, copied.
    big = os.path.join(data, "workspaces/big")
    os.makedirs(big)
    refs = [os.path.join(DOCS, "ref", n) for n in os.listdir(os.path.join(DOCS, "ref"))]
    for i in range(COPIES):
        for r in refs:
            shutil.copy(r, os.path.join(big, f"{i:03}-{os.path.basename(r)}"))
    t = time.perf_counter()
    first = search("big", {"query": "warm up", "mode": "keyword"})
    chunks = first["index"]["chunks"]
    print(f"indexed {first['index']['files']} files, {chunks} chunks in {time.perf_counter() - t:.1f} s")
    times = []
    for q in questions[:20]:
        t = time.perf_counter()
        search("big", {"query": q["q"], "mode": "keyword", "top_k": 5})
        times.append((time.perf_counter() - t) * 1000)
    print(f"keyword query over {chunks} chunks, whole call: median {statistics.median(times):.1f} ms, "
          f"min {min(times):.1f} ms, max {max(times):.1f} ms")
finally:
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
