# Sourced by the status page tests: start_small_server HOST_BUDGET starts
# gdn-server "$server_bin" (cpu backend, a small shape, free ports, a device
# tier of 6 pages of 64 KiB, so gdn-bench's 4 sessions of 2 layers spill) with
# its output in $work, and sets server_pid, grpc and metrics from its one
# stdout line "gdn-server listening grpc=HOST:PORT metrics=HOST:PORT". Calls
# the sourcing script's `fail` when the server does not come up.
start_small_server() {
  "$server_bin" --backend=cpu --cpu_threads=1 --layers=2 --qk_heads=2 --v_heads=4 \
    --head_dim_k=64 --head_dim_v=64 --activation_dtype=fp32 \
    --device_state_budget=384KiB --host_state_budget="$1" \
    --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --drain_timeout_s=1 \
    >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 600); do
    if grep -qs "^gdn-server listening" "$work/server.out"; then break; fi
    kill -0 "$server_pid" 2>/dev/null || fail "gdn-server exited before listening"
    sleep 0.1
  done
  local line
  line="$(grep "^gdn-server listening" "$work/server.out")" || fail "no listening line in 60 s"
  grpc="$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' <<<"$line")"
  metrics="$(sed -n 's/.* metrics=\([^ ]*\).*/\1/p' <<<"$line")"
}
