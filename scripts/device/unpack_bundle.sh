# Sourced by the device visit scripts, from the repository root: sets
# BUNDLE (where bin/ and lib/ are), B (its bin/) and LD_LIBRARY_PATH. A
# bundle that bundle.sh packed (over 60 MiB: .bundle/pack.tar.xz) is
# unpacked to /tmp/gdn_bundle and linked as .bundle/bin and .bundle/lib, so
# every script after this one finds the binaries in .bundle/bin (and a
# packed tools/ in .bundle/tools).
BUNDLE=$PWD/.bundle
if [ -f .bundle/pack.tar.xz ]; then
  BUNDLE=/tmp/gdn_bundle
  # A warm machine may hold an earlier visit's unpacked bundle: unpacked
  # again unless it came from this very pack.
  sum=$(md5sum < .bundle/pack.tar.xz)
  if [ "$(cat "$BUNDLE/PACK_MD5" 2>/dev/null)" != "$sum" ]; then
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
      .bundle/pack.tar.xz "$BUNDLE"
    echo "$sum" > "$BUNDLE/PACK_MD5"
  fi
  rm -rf .bundle/bin .bundle/lib .bundle/tools
  ln -s "$BUNDLE/bin" .bundle/bin
  ln -s "$BUNDLE/lib" .bundle/lib
  [ -d "$BUNDLE/tools" ] && ln -s "$BUNDLE/tools" .bundle/tools  # e.g. a carried perf
fi
export LD_LIBRARY_PATH=$BUNDLE/lib:$BUNDLE/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$BUNDLE/bin
