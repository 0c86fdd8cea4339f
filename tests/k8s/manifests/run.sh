#!/usr/bin/env bash
# make test's `kubernetes` phase: the pinned venv (kubectl's kustomize,
# jsonschema, PyYAML, the schema source; made once under target/venvs/), then
# tests/k8s/manifests/check.py against deploy/kubernetes and the debug binary.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
python=$("$repo/tests/venv.sh" "$repo/tests/k8s/manifests/requirements.txt" | tail -n 1)
exec "$python" "$repo/tests/k8s/manifests/check.py"
