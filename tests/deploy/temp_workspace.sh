# shellcheck shell=bash
# shellcheck disable=SC2154  # test_name and log_globs are the sourcing test's
# Sourced by the deploy tests (affinity_test.sh, metrics_tls_test.sh): a
# temporary work directory ($work), the pids of the processes a test starts
# ($pids, appended by the test), and an EXIT trap that stops them and, when
# the test failed, prints the tail of its logs.
#
# Set before sourcing:
#   test_name   prefix of the messages ("affinity_test")
#   log_globs   the logs to show on failure, as globs under $work
#               (e.g. '*.log nginx/error.log')
#   log_lines   lines of each (default 40)
work="$(mktemp -d)"
# nginx workers started by root run as nobody: they must reach the temp paths.
chmod 755 "$work"
pids=()
cleanup() {
  local status=$?
  # TERM first: nginx's master stops its workers only when it is asked to
  # (a KILLed master leaves them running); then KILL whatever is left.
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for _ in $(seq 20); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "$test_name: FAILED ($status); logs:" >&2
    local pattern f
    for pattern in $log_globs; do
      for f in "$work"/$pattern; do
        [ -f "$f" ] || continue
        echo "---- $f (last ${log_lines:-40} lines)" >&2
        tail -n "${log_lines:-40}" "$f" >&2
      done
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
