#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz (ASan +
# UBSan, CPU only) and runs each for a bounded time, starting from its seed
# corpus in tests/fuzz/corpus/<target>/. New inputs go to a temporary folder,
# never into the tree. Fails when any target finds a crash, a sanitizer
# report, a broken property (FUZZ_CHECK) or an input that hangs; the input
# is kept in build-fuzz/artifacts/ (rerun: build-fuzz/tests/fuzz/<t>_fuzz FILE).
#
#   scripts/fuzz.sh [--time=SECONDS] [TARGET...]
#     --time / GDN_FUZZ_TIME  seconds per target (default 20)
#     TARGET                  forward_wire tensor_codec session_file
#                             channel_attach forward_request_reader import_chunks
#                             (default: all)
#     GDN_FUZZ_SEED           libFuzzer's -seed (default: a random one); CI
#                             fixes it, so every run tries the same inputs in
#                             the same order
#     GDN_FUZZ_RUNS=fixed     run each target for its fixed number of inputs
#                             (the table below, ~20 s each on a 2-core VM)
#                             instead of for a time: with a fixed seed, as
#                             many inputs, from the same mutations, on a fast
#                             machine as on a slow one (a time bound let a
#                             faster CI machine reach inputs a local run never
#                             tried); --time then only caps a run that is far
#                             slower than expected (3x)
#     GDN_FUZZ_BUILD_DIR      build folder (default build-fuzz); GDN_JOBS (2)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GDN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${GDN_FUZZ_TIME:-20}"
targets=()
for arg in "$@"; do
  case "$arg" in
    --time=*) seconds="${arg#--time=}" ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $arg" >&2; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=(forward_wire tensor_codec session_file channel_attach forward_request_reader
    import_chunks)
fi

bash "$root/scripts/install_deps.sh"
# -O1 and line tables only: fuzzing wants fast builds and symbolized stacks,
# not the last few percent of speed.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  -DGDN_WITH_CUDA=OFF -DGDN_BUILD_BENCHMARKS=OFF -DGDN_FUZZ=ON > /dev/null
cmake --build "$build" -j "${GDN_JOBS:-2}" --target gdn_fuzzers

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
artifacts="$build/artifacts"
mkdir -p "$artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Inputs per target for GDN_FUZZ_RUNS=fixed: about 20 s of each on this
# project's 2-core VM (their speeds differ 15x).
declare -A fixed_runs=([forward_wire]=600000 [tensor_codec]=900000 [session_file]=700000
  [channel_attach]=100000 [forward_request_reader]=500000 [import_chunks]=1500000)
status=0
for t in "${targets[@]}"; do
  binary="$build/tests/fuzz/${t}_fuzz"
  [ -x "$binary" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
  mkdir -p "$work/$t"
  # Inputs: the temporary folder first (new inputs land there), then the
  # seeds. -timeout: one input taking 10 s is a hang, not slowness.
  seed=()
  [ -n "${GDN_FUZZ_SEED:-}" ] && seed=(-seed="$GDN_FUZZ_SEED")
  bound=(-max_total_time="$seconds")
  if [ "${GDN_FUZZ_RUNS:-}" = fixed ]; then
    bound=(-runs="${fixed_runs[$t]}" -max_total_time="$((3 * seconds))")
  fi
  if "$binary" "${seed[@]}" "${bound[@]}" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" "$work/$t" "$root/tests/fuzz/corpus/$t" \
      > "$work/$t.log" 2>&1; then
    echo "fuzz $t: ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" |
      grep -o '[0-9]*$') runs in $(grep -m1 -o 'Done [0-9]* runs in [0-9]*' "$work/$t.log" |
      grep -o '[0-9]*$' || echo "$seconds") s)"
  else
    echo "fuzz $t: FAILED; the input is in $artifacts/" >&2
    grep -v -E '^#[0-9]+ ' "$work/$t.log" | tail -60 >&2
    status=1
  fi
done
exit $status
