#!/usr/bin/env python3
"""Cut the Kubernetes JSON schemas that deploy/kubernetes uses out of the
pinned kubernetes-validate package into tests/k8s/manifests/schemas/.

    tests/k8s/manifests/vendor_schemas.py           # (re)write the vendored file
    tests/k8s/manifests/vendor_schemas.py --check   # fail if it differs (make test)

Source: kubernetes-validate (PyPI, pinned in requirements.txt), its
`kubernetes-json-schema/v<VERSION>-local-strict/_definitions.json`: the
Kubernetes OpenAPI definitions of that release as JSON Schema 2020-12, strict
(no property a definition does not name). Kept: the definitions of KINDS and
everything they reference, without descriptions; nothing else.
"""

import json
import sys
from importlib import metadata
from pathlib import Path

import kubernetes_validate

VERSION = "1.35.0"  # one Kubernetes minor: the oldest one upstream still supports
# Every apiVersion/kind the manifests use (the checker refuses any other).
KINDS = [
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "Ingress"),
]
HERE = Path(__file__).resolve().parent
OUT = HERE / "schemas" / f"kubernetes-v{VERSION}-strict.json"
PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")


def source_defs():
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{VERSION}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


def gvk_name(defs, api_version, kind):
    group, _, version = api_version.rpartition("/")
    for name, schema in defs.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["version"], gvk["kind"]) == (group, version, kind):
                return name
    sys.exit(f"vendor_schemas: no definition of {api_version} {kind} in v{VERSION}")


def strip(node, refs):
    """The node without descriptions, its $refs local and collected."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                continue
            if key == "$ref":
                prefix = next(p for p in PREFIXES if value.startswith(p))
                refs.append(value[len(prefix):])
                out[key] = "#/$defs/" + value[len(prefix):]
            else:
                out[key] = strip(value, refs)
        return out
    if isinstance(node, list):
        return [strip(v, refs) for v in node]
    return node


def build():
    defs = source_defs()
    kinds = {f"{a} {k}": gvk_name(defs, a, k) for a, k in KINDS}
    kept, todo = {}, list(kinds.values())
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        schema = defs[name]
        if name in kinds.values():
            # Manifests carry no status: leave it (and all it references) out.
            schema = dict(schema, properties={
                k: v for k, v in schema["properties"].items() if k != "status"})
        refs = []
        kept[name] = strip(schema, refs)
        todo.extend(refs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "source": f"kubernetes-validate {metadata.version('kubernetes-validate')}, "
        f"kubernetes-json-schema/v{VERSION}-local-strict/_definitions.json, descriptions removed",
        "kubernetes": VERSION,
        "kinds": kinds,
        "$defs": dict(sorted(kept.items())),
    }


def render(doc):
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def main():
    text = render(build())
    if sys.argv[1:] == ["--check"]:
        if not OUT.is_file() or OUT.read_text() != text:
            sys.exit(f"vendor_schemas: {OUT.relative_to(HERE.parents[2])} is not what "
                     "tests/k8s/manifests/vendor_schemas.py cuts from the pinned package: rerun it")
        print(f"vendored schemas up to date ({OUT.name}, {len(text)} bytes)")
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
