#!/usr/bin/env bash
# The Python client's tests (client/python/tests) under ctest.
#
#   run_pytest.sh setup GDN_SERVER PACKAGE_DIR WORK_DIR   venv + package (+ torch, see below)
#   run_pytest.sh test  GDN_SERVER PACKAGE_DIR WORK_DIR   pytest against gdn-server --backend=cpu
#
# setup: WORK_DIR/venv is made once (python3 -m venv) with the README's
# install command, `pip install ./client/python` (build isolation: setuptools
# and grpcio-tools from PyPI build the stubs), plus pytest; it is remade when
# pyproject.toml or setup.py change. Every later setup reinstalls only the
# package (--no-deps --no-build-isolation, seconds), so the tests always see
# the current sources.
#
# torch + transformers (the torch tests and the transformers check) come from
# PyPI, pinned below, into one folder shared by every build directory,
# $GDN_PYTHON_TORCH_DIR (default ~/.cache/gdn-serve/python-torch): PyPI's
# Linux torch wheel brings its CUDA libraries, ~2.5 GB to download and 5.6 GB
# installed, about 2 minutes here on the first run and nothing after that. The
# venv sees it through a .pth file. GDN_PYTHON_TORCH=0 leaves it out; a failed
# download only warns, and the torch tests then skip.
set -euo pipefail
mode="$1" server="$2" package="$3" work="$4"
torch_pins=(torch==2.15.0 transformers==5.24.0)
venv="$work/venv"
say() { echo "python_client: $*"; }

python_site() { "$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }

ensure_venv() {
  local want have=""
  want="$(cat "$package/pyproject.toml" "$package/setup.py" | sha256sum | cut -c1-16)"
  [ -f "$work/venv.stamp" ] && have="$(cat "$work/venv.stamp")"
  if [ -x "$venv/bin/python" ] && [ "$have" = "$want" ]; then
    say "reinstalling gdn_serve from $package"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
      --force-reinstall "$package"
    return
  fi
  if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    echo "python_client: python3 has no venv module (scripts/install_deps.sh installs python3-venv)" >&2
    exit 1
  fi
  say "creating $venv: pip install $package pytest"
  rm -rf "$venv" "$work/venv.stamp"
  mkdir -p "$work"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$package" pytest setuptools grpcio-tools
  echo "$want" >"$work/venv.stamp"
}

ensure_torch() {
  local pth
  pth="$(python_site)/gdn_serve_torch.pth"
  rm -f "$pth"
  if [ "${GDN_PYTHON_TORCH:-1}" = "0" ]; then
    say "GDN_PYTHON_TORCH=0: torch tests will skip"
    return
  fi
  local dir="${GDN_PYTHON_TORCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gdn-serve/python-torch}"
  local want="${torch_pins[*]} $("$venv/bin/python" -c 'import sys; print(sys.version_info[:2])')"
  mkdir -p "$dir"
  # 5.6 GB installed: never where it could fill the disk the build needs.
  local free_gb
  free_gb=$(df -Pk "$dir" | awk 'NR == 2 { print int($4 / 1048576) }')
  if [ ! -f "$dir/stamp" ] && [ "${free_gb:-0}" -lt 20 ]; then
    echo "python_client: WARNING: only ${free_gb} GB free under $dir (torch needs ~6, and" \
         "the build its share): torch tests skip" >&2
    return
  fi
  exec 9>"$dir.lock"
  flock 9  # several build directories may set up at once
  if [ ! -f "$dir/stamp" ] || [ "$(cat "$dir/stamp")" != "$want" ]; then
    say "installing ${torch_pins[*]} into $dir (PyPI; ~2.5 GB, once)"
    rm -rf "$dir/site"
    if ! "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
        --target "$dir/site" "${torch_pins[@]}"; then
      echo "python_client: WARNING: torch / transformers could not be installed; their tests skip" >&2
      rm -rf "$dir/site"
      exec 9>&-
      return
    fi
    echo "$want" >"$dir/stamp"
  fi
  exec 9>&-
  echo "$dir/site" >"$pth"
}

case "$mode" in
  setup)
    ensure_venv
    ensure_torch
    ;;
  test)
    if [ ! -x "$server" ]; then
      echo "python_client: $server is not built" >&2
      exit 1
    fi
    cd "$work"
    # -p no:cacheprovider: nothing written into the source tree.
    GDN_SERVER="$server" PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q \
      -p no:cacheprovider -rs "$package/tests"
    ;;
  *)
    echo "usage: run_pytest.sh setup|test GDN_SERVER PACKAGE_DIR WORK_DIR" >&2
    exit 2
    ;;
esac
