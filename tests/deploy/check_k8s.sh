#!/usr/bin/env bash
# ctest k8s_manifests: renders every overlay of deploy/k8s with `kubectl kustomize` and validates
# each object offline against the Kubernetes/KEDA/prometheus-operator schemas of the npm
# kubernetes-models packages (tests/deploy/k8s_validate.mjs), then checks what the schemas cannot
# see: selectors, probes, the shutdown/lease relation, Secrets, ports, the KEDA query's table.
# A broken object is fed to the validator too, which must reject it.
#   bash tests/deploy/check_k8s.sh
# Exit 77 (skipped) without kubectl (Debian: kubernetes-client), node, or the npm packages
# (scripts/install-deps.sh tools puts them in $GPSEL_TOOLS_DIR, default ~/.cache/gpsel-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${GPSEL_TOOLS_DIR:-${HOME:-/tmp}/.cache/gpsel-tools}"
for tool in kubectl node python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (scripts/install-deps.sh)"; exit 77; }
done
for pkg in kubernetes-models @kubernetes-models/keda @kubernetes-models/prometheus-operator; do
  [ -d "$tools/node_modules/$pkg" ] || {
    echo "SKIP: npm package $pkg not in $tools (scripts/install-deps.sh tools)"; exit 77; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3-yaml missing"; exit 77; }
echo "kubectl: $(kubectl version --client 2>/dev/null | tr '\n' ' ')"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for overlay in deploy/k8s/overlays/*/; do
  name=$(basename "$overlay")
  echo "== overlay $name"
  kubectl kustomize "$overlay" > "$work/$name.yaml" 2> "$work/$name.err" || {
    cat "$work/$name.err"; echo "FAIL: $name does not render"; status=1; continue; }
  python3 -c 'import json, sys, yaml
json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))' \
    "$work/$name.yaml" "$work/$name.json"
  node tests/deploy/k8s_validate.mjs "$tools" "$work/$name.json" || status=1
  python3 tests/deploy/k8s_checks.py "$name" "$work/$name.json" || status=1
  # Negative control: the validator must reject a Deployment with a string replica count and a
  # probe port that is not a number.
  python3 - "$work/$name.json" "$work/$name.broken.json" <<'PY'
import json, sys
objects = json.load(open(sys.argv[1]))
deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "gpsel")
deployment["spec"]["replicas"] = "two"
deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "grpc"
json.dump([deployment], open(sys.argv[2], "w"))
PY
  if node tests/deploy/k8s_validate.mjs "$tools" "$work/$name.broken.json" > "$work/broken.out"; then
    cat "$work/broken.out"; echo "FAIL: the validator accepted a broken Deployment"; status=1
  else
    echo "ok   a broken Deployment is rejected: $(grep -o 'data/spec/replicas[^,]*' "$work/broken.out" | head -1)"
  fi
done
[ "$status" -eq 0 ] && echo "check_k8s: every overlay renders and validates"
exit "$status"
