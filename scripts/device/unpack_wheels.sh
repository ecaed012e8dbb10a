# shellcheck shell=bash
# Sourced by the device visit scripts, from the repository root: unpacks the
# gdn_serve package and the grpcio / protobuf wheels of this Python
# (carried in .whl/, made here by `python_visit.sh prepare`) into PYDIR
# (default /tmp/gdn_py) and puts PYDIR first on PYTHONPATH. Returns 1 when
# a wheel is missing (the caller decides whether that is fatal).
PYDIR=${PYDIR:-/tmp/gdn_py}
rm -rf "$PYDIR" && mkdir -p "$PYDIR"
wheels_ok=0
_tag=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
for _whl in .whl/gdn_serve-*.whl .whl/protobuf-*.whl .whl/grpcio-*-"$_tag"-*.whl; do
  if [ -f "$_whl" ]; then
    python3 -m zipfile -e "$_whl" "$PYDIR"
  else
    echo "missing wheel $_whl (run 'scripts/device/python_visit.sh prepare' here)" >&2
    wheels_ok=1
  fi
done
export PYTHONPATH=$PYDIR${PYTHONPATH:+:$PYTHONPATH}
[ "$wheels_ok" = 0 ]
