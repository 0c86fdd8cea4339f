#!/usr/bin/env python3
"""The local embedding model's pace in the sandbox, and whether a new build
makes the same vectors: doc_retrieval embeds every chunk of the documents of
tests/fixtures/docs (all-MiniLM-L6-v2 from `make plugins`, run by the doc
component's own encoder) through a release server, timing the embedding calls;
with BASE_WASM (another doc.wasm, e.g. an earlier build) both are run in one
go and their vectors compared chunk by chunk (cosine similarity).

    make build plugins && python3 tests/bench/embed_speed.py
    BASE_WASM=/tmp/doc-before.wasm python3 tests/bench/embed_speed.py

Settings: DOC_WASM (default target/plugins/doc.wasm), LIMIT (documents,
default all), PER_CALL (chunks embedded per call, default 32: the manifest's fuel and time fit it)."""

import math
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import MODEL, BenchServer, doc_manifest_with_local_model, index_vectors  # noqa: E402

BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
DOCS = os.path.join(ROOT, "tests/fixtures/docs")
NEW = os.environ.get("DOC_WASM", os.path.join(ROOT, "target/plugins/doc.wasm"))
BASE = os.environ.get("BASE_WASM")
LIMIT = int(os.environ.get("LIMIT", "0"))
PER_CALL = os.environ.get("PER_CALL", "32")

for need, why in ((BIN, "make build"), (NEW, "make plugins"), (os.path.join(MODEL, "model.safetensors"), "make plugins")):
    if not os.path.exists(need):
        print(f"SKIPPED embed speed: {need} is missing ({why})")
        sys.exit(0)


def run(wasm):
    """(seconds embedding, chunks, calls, vectors) of one build."""
    work = tempfile.mkdtemp()
    try:
        plugins = os.path.join(work, "plugins")
        os.makedirs(plugins)
        shutil.copy(wasm, os.path.join(plugins, "doc.wasm"))
        manifest = doc_manifest_with_local_model().replace("[config]\n", f'[config]\nembed_chunks_per_call = "{PER_CALL}"\n', 1)
        open(os.path.join(plugins, "doc.toml"), "w").write(manifest)
        data = os.path.join(work, "data")
        ws = os.path.join(data, "workspaces/embed")
        os.makedirs(ws)
        names = sorted(n for n in os.listdir(DOCS) if os.path.isfile(os.path.join(DOCS, n)) and not n.endswith(".md"))
        for n in names[:LIMIT or None]:
            shutil.copy(os.path.join(DOCS, n), ws)
        server = BenchServer(BIN, plugins, data)
        try:
            server.wait_ready()
            first = server.invoke("doc_retrieval", {"query": "warm up", "mode": "keyword"}, "embed")
            chunks = first["index"]["chunks"]
            calls, fuel, started = 0, 0, time.perf_counter()
            pending = first["index"].get("pending_vectors", 0)
            while pending > 0:
                body = server.answer("doc_retrieval", {"query": "warm up", "mode": "hybrid"}, "embed")
                pending = body["result"]["index"].get("pending_vectors", 0)
                fuel += body.get("fuel") or 0
                calls += 1
            took = time.perf_counter() - started
        finally:
            server.stop()
        return took, chunks, calls, fuel, index_vectors(ws)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


results = {}
for label, wasm in (("base", BASE), ("new", NEW)):
    if not wasm:
        continue
    took, chunks, calls, fuel, vectors = run(wasm)
    results[label] = (took, vectors)
    print(f"{label:5} {os.path.basename(wasm)} ({os.path.getsize(wasm) / 1e6:.2f} MB): {chunks} chunks embedded "
          f"in {took:.1f} s over {calls} calls, {took / max(chunks, 1) * 1000:.0f} ms and "
          f"{fuel / max(chunks, 1) / 1e9:.1f} G fuel per chunk (the model's load in each call included)")
if "base" in results:
    (tb, vb), (tn, vn) = results["base"], results["new"]
    sims = [cosine(a, b) for a, b in zip(vb, vn)]
    print(f"new / base time: {tn / tb:.2f} ({tb / tn:.2f}x faster); cosine of the {len(sims)} vector pairs: "
          f"min {min(sims):.6f}, median {statistics.median(sims):.6f}")
