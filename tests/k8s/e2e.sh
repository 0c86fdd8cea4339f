#!/usr/bin/env bash
# End-to-end: toolhost's Kubernetes node provider on a real cluster with
# kubernetes-sigs/agent-sandbox. Installs agent-sandbox (CRDs + controller),
# runs toolhost (outside the cluster) with [kubernetes], makes a shell call,
# checks the SandboxClaim exists while the session lives and is deleted
# after the session closes.
#
# Without a usable cluster it prints why and exits 0 (it never fails a
# machine that has no cluster).
#
#   tests/k8s/e2e.sh                      # the current kubectl context
#   E2E_KIND=1 tests/k8s/e2e.sh           # make (and delete) a kind cluster
#
# The session workspaces must be one directory seen by toolhost and by the
# sandbox pods at the same path: E2E_SHARED_DIR (default
# /tmp/toolhost-e2e-workspaces) becomes a hostPath PersistentVolume. With
# E2E_KIND=1 the kind node mounts it; on another cluster, mount it at the
# same path on every node yourself and set E2E_SHARED_DIR_ON_NODES=1.
#
# Settings: AGENT_SANDBOX_VERSION (v0.5.6, the vendored CRDs' release),
# E2E_NAMESPACE (toolhost-e2e), E2E_NODE_IMAGE (toolhost-node:latest; on
# kind it is loaded from the local Docker engine, elsewhere the cluster must
# be able to pull it), TOOLHOST_BIN (target/debug/toolhost), E2E_PORT (18431),
# E2E_KEEP=1 keeps what it made.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${AGENT_SANDBOX_VERSION:-v0.5.6}
ns=${E2E_NAMESPACE:-toolhost-e2e}
image=${E2E_NODE_IMAGE:-toolhost-node:latest}
shared=${E2E_SHARED_DIR:-/tmp/toolhost-e2e-workspaces}
port=${E2E_PORT:-18431}
bin=${TOOLHOST_BIN:-$root/target/debug/toolhost}
kind_cluster=toolhost-e2e
made_kind=0
work=""
toolhost_pid=""

skip() {
    echo "tests/k8s/e2e.sh: SKIPPED: $*"
    exit 0
}

cleanup() {
    if [[ -n "$toolhost_pid" ]]; then
        kill "$toolhost_pid" 2>/dev/null || true
        wait "$toolhost_pid" 2>/dev/null || true
    fi
    if [[ "${E2E_KEEP:-0}" != 1 ]]; then
        kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
        kubectl delete persistentvolume "$ns-workspaces" --ignore-not-found >/dev/null 2>&1 || true
        if [[ "$made_kind" == 1 ]]; then
            kind delete cluster --name "$kind_cluster" >/dev/null 2>&1 || true
        fi
        if [[ -n "$work" ]]; then
            rm -rf "$work"
        fi
    fi
}
trap cleanup EXIT

command -v kubectl >/dev/null || skip "kubectl is not installed"
command -v curl >/dev/null || skip "curl is not installed"

if [[ "${E2E_KIND:-0}" == 1 ]]; then
    command -v kind >/dev/null || skip "E2E_KIND=1 but kind is not installed"
    command -v docker >/dev/null || skip "E2E_KIND=1 but docker is not installed"
    docker info >/dev/null 2>&1 || skip "E2E_KIND=1 but the Docker engine does not answer"
    docker image inspect "$image" >/dev/null 2>&1 ||
        skip "the node image $image is not in the local Docker engine (build it with the project's image script)"
    mkdir -p "$shared"
    chmod 1777 "$shared"
    kind_config=$(mktemp)
    cat >"$kind_config" <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  extraMounts:
  - hostPath: $shared
    containerPath: $shared
KIND
    kind create cluster --name "$kind_cluster" --config "$kind_config" --wait 120s
    rm -f "$kind_config"
    made_kind=1
    kind load docker-image "$image" --name "$kind_cluster"
elif [[ "${E2E_SHARED_DIR_ON_NODES:-0}" != 1 ]]; then
    timeout 10 kubectl cluster-info >/dev/null 2>&1 ||
        skip "no Kubernetes cluster answers (kubectl cluster-info failed); set E2E_KIND=1 to make a kind cluster"
    skip "a cluster answers, but the workspaces directory $shared must be mounted at the same path on its nodes: do that and set E2E_SHARED_DIR_ON_NODES=1, or use E2E_KIND=1"
fi

timeout 10 kubectl cluster-info >/dev/null 2>&1 ||
    skip "no Kubernetes cluster answers (kubectl cluster-info failed)"

echo "== agent-sandbox $version"
if ! kubectl apply --server-side -f \
    "https://github.com/kubernetes-sigs/agent-sandbox/releases/download/$version/sandbox-with-extensions.yaml"; then
    skip "cannot install agent-sandbox $version (no network to github.com?)"
fi
kubectl -n agent-sandbox-system rollout status deployment/agent-sandbox-controller --timeout=180s
for crd in sandboxes.agents.x-k8s.io sandboxtemplates.extensions.agents.x-k8s.io \
    sandboxwarmpools.extensions.agents.x-k8s.io sandboxclaims.extensions.agents.x-k8s.io; do
    kubectl wait --for=condition=Established "crd/$crd" --timeout=60s
done

echo "== namespace $ns, workspaces volume on $shared"
mkdir -p "$shared"
chmod 1777 "$shared"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $ns-workspaces
spec:
  capacity: { storage: 1Gi }
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: { path: $shared, type: Directory }
  claimRef: { namespace: $ns, name: toolhost-workspaces }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: toolhost-workspaces
  namespace: $ns
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: $ns-workspaces
  resources: { requests: { storage: 1Gi } }
YAML

echo "== toolhost with [kubernetes]"
if [[ ! -x "$bin" ]]; then
    (cd "$root" && cargo build -p toolhost)
fi
work=$(mktemp -d)
mkdir -p "$work/plugins/shell" "$work/data"
cp "$root/plugins/shell/driver.py" "$work/plugins/shell/"
sed "s|^image = .*|image = \"$image\"|" "$root/plugins/shell/shell.toml" >"$work/plugins/shell/shell.toml"
ln -s "$shared" "$work/data/workspaces"
kubeconfig=$work/kubeconfig
kubectl config view --raw --minify >"$kubeconfig"
cat >"$work/toolhost.toml" <<TOML
[server]
bind = "127.0.0.1:$port"

[kubernetes]
namespace = "$ns"
kubeconfig = "$kubeconfig"
instance = "e2e"
workspace_pvc = "toolhost-workspaces"
ready_timeout_s = 300
TOML
"$bin" serve --config "$work/toolhost.toml" --plugins "$work/plugins" --data "$work/data" \
    >"$work/toolhost.log" 2>&1 &
toolhost_pid=$!
for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null

echo "== a shell call"
# Another session's file, which this session's sandbox must not see.
mkdir -p "$shared/other-session" && echo secret >"$shared/other-session/secret.txt"
answer=$(curl -sS --max-time 400 -H 'content-type: application/json' -H 'x-toolhost-session: e2e' \
    -d '{"params": {"command": "echo hello-from-the-cluster > made-in-pod.txt; cat made-in-pod.txt; pwd; find / -name secret.txt -path \"*other-session*\" 2>/dev/null | grep -q . && echo NOT-ISOLATED || echo isolated"}}' \
    "http://127.0.0.1:$port/tools/shell_run/invoke")
echo "$answer"
if ! grep -q 'hello-from-the-cluster' <<<"$answer"; then
    echo "FAIL: the shell call did not answer as expected; toolhost's log:" >&2
    tail -n 50 "$work/toolhost.log" >&2
    exit 1
fi
if grep -q 'NOT-ISOLATED' <<<"$answer" || ! grep -q 'isolated' <<<"$answer"; then
    echo "FAIL: the sandbox sees another session's workspace" >&2
    exit 1
fi
if [[ ! -f "$shared/e2e/made-in-pod.txt" ]]; then
    echo "FAIL: the file the pod wrote is not in the session's workspace $shared/e2e" >&2
    exit 1
fi

claims=$(kubectl -n "$ns" get sandboxclaims -l toolhost.dev/session=e2e -o name)
if [[ -z "$claims" ]]; then
    echo "FAIL: no SandboxClaim labelled with the session" >&2
    exit 1
fi
echo "claims while the session lives: $claims"

echo "== close the session: the claim goes"
curl -fsS -X DELETE -H 'x-toolhost-session: e2e' "http://127.0.0.1:$port/sessions/e2e" >/dev/null
for claim in $claims; do
    kubectl -n "$ns" wait --for=delete "$claim" --timeout=120s
done
left=$(kubectl -n "$ns" get sandboxclaims -l toolhost.dev/session=e2e -o name)
if [[ -n "$left" ]]; then
    echo "FAIL: claims left after the session closed: $left" >&2
    exit 1
fi
echo "PASS: tests/k8s/e2e.sh"
