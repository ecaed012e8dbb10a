# Sourced by one-call device visit scripts: `say` and `step`, bounded by the
# call's deadline. Needs OUT (the files that come back), END (epoch seconds
# the visit must end by) and LOG (the visit's log, under OUT).
#   step SECONDS NAME cmd...  runs cmd under min(SECONDS, what is left - 5 s),
#                             output to $OUT/NAME.txt; logs its status and the
#                             gtest / sanitizer summary lines.
say() { echo "== $* ($(date -u +%T), $(( END - $(date +%s) )) s left)" | tee -a "$LOG"; }
step() {
  local cap=$1 name=$2; shift 2
  local left=$(( END - $(date +%s) - 5 ))
  [ "$left" -lt 10 ] && { say "skip $name"; return; }
  [ "$cap" -gt "$left" ] && cap=$left
  timeout "$cap" "$@" > "$OUT/$name.txt" 2>&1
  say "$name rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$name.txt" | head -8 | tee -a "$LOG"
}
