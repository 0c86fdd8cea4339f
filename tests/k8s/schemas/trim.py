#!/usr/bin/env python3
"""Trim Kubernetes' published OpenAPI (v2, `api/openapi-spec/swagger.json` of
one release) to what toolhost's cluster provider sends, for the schema tests
(host/tests/k8s_schema.rs, host/tests/k8s_replay.rs).

Kept: the definitions reachable from ROOTS (descriptions dropped), and the
query parameters of the pod exec connect call. Nothing else is changed.

    python3 tests/k8s/schemas/trim.py SWAGGER_JSON VERSION > tests/k8s/schemas/kubernetes-VERSION.json

The vendored output was made from Kubernetes v1.36.0's swagger.json (as
downloaded unmodified by kube-rs/k8s-pb at commit
7d74b0b0eb581c9aedc175e25773226e37446460, file
k8s-pb-codegen/openapi/swagger.json; the same file as
https://raw.githubusercontent.com/kubernetes/kubernetes/v1.36.0/api/openapi-spec/swagger.json).
"""

import hashlib
import json
import sys

ROOTS = [
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.PodSpec",
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
]
EXEC_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/exec"
REF = "#/definitions/"


def strip(node):
    """The schema without descriptions."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith(REF):
                yield v[len(REF):]
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def main():
    path, version = sys.argv[1], sys.argv[2]
    raw = open(path, "rb").read()
    spec = json.loads(raw)
    defs = spec["definitions"]
    keep, todo = {}, list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = strip(defs[name])
        todo.extend(refs(keep[name]))
    params = []
    for p in spec["paths"][EXEC_PATH]["parameters"]:
        if "$ref" in p:
            p = spec["parameters"][p["$ref"].split("/")[-1]]
        params.append(strip(p))
    out = {
        "source": {
            "kubernetes": version,
            "file": "api/openapi-spec/swagger.json",
            "sha256": hashlib.sha256(raw).hexdigest(),
            "roots": ROOTS,
            "trimmed_by": "tests/k8s/schemas/trim.py",
        },
        "definitions": dict(sorted(keep.items())),
        "exec_parameters": sorted(params, key=lambda p: p["name"]),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
