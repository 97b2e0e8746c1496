# Sourced by the bench/run*.sh scripts: moves to the repository root, sets
# BUILD_DIR (TESSEL_BUILD_DIR, default build), `cores` and `cpu`, and
# defines build_target TARGET, which configures the build if needed and
# builds TARGET, holding the build lock where several jobs share the tree.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}

locked() {
  if command -v flock >/dev/null; then
    flock /tmp/tessel-build.lock "$@"
  else
    "$@"
  fi
}

build_target() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    locked cmake -G Ninja -S . -B "$BUILD_DIR"
  fi
  locked ninja -C "$BUILD_DIR" "$1" >&2
}

cores=$(nproc 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
