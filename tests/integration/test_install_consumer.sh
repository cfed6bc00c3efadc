#!/usr/bin/env bash
# cmake --install, then build a tiny consumer with find_package(ckpt) (against
# ckpt::ckpt and ckpt::ckpt_static) and with pkg-config, and run all three.
# The installed targets carry no internal include directory, and
# ckpt::ckpt no dependency (they are private to libckpt.so).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$CKPT_BUILD" --prefix "$work/prefix" > /dev/null
targets="$work/prefix/lib/cmake/ckpt/ckptTargets.cmake"
if grep -nE 'libckpt/src|uploaders' "$targets" ||
   { [[ -n "${CKPT_SRC:-}" ]] && grep -nF "$CKPT_SRC" "$targets"; }; then
  echo "FAIL: an internal include directory in the installed targets" >&2
  exit 1
fi
if sed -n '/^set_target_properties(ckpt::ckpt PROPERTIES/,/^)/p' "$targets" |
   grep -n INTERFACE_LINK_LIBRARIES; then
  echo "FAIL: ckpt::ckpt passes its dependencies on" >&2
  exit 1
fi
mkdir -p "$work/app"
cat > "$work/app/main.c" <<'C'
#include <ckpt.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    int x = 42; unsigned long long step = 0;
    if (ckpt_open(&cfg, &ctx)) { printf("open: %s\n", ckpt_errmsg(NULL)); return 1; }
    ckpt_protect(ctx, "x", &x, sizeof x);
    if (ckpt_save(ctx, 7) || ckpt_wait(ctx)) return 1;
    x = 0;
    if (ckpt_restore(ctx, (uint64_t *)&step) || x != 42 || step != 7) return 1;
    ckpt_close(ctx);
    printf("consumer ok %s\n", ckpt_version_string());
    return 0;
}
C
cat > "$work/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(ckpt REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE ckpt::ckpt)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE ckpt::ckpt_static)
C
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/app/build" > /dev/null
export CKPT_STORE="file://$work/store" CKPT_RUN=consumer
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/build/consumer"
if readelf -d "$work/app/build/consumer_static" | grep -q 'NEEDED.*libckpt'; then
  echo "FAIL: consumer_static loads libckpt.so" >&2
  exit 1
fi
CKPT_RUN=consumer_static "$work/app/build/consumer_static"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" cc -o "$work/pc" "$work/app/main.c" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs ckpt)
CKPT_RUN=consumer2 LD_LIBRARY_PATH="$work/prefix/lib" "$work/pc"
# ckpt_mpi.h is installed beside ckpt.h; an MPI program builds against the
# package with find_package(MPI) and saves and restores on 2 ranks
[[ -f "$work/prefix/include/ckpt_mpi.h" ]] || { echo "FAIL: ckpt_mpi.h not installed" >&2; exit 1; }
if command -v mpirun > /dev/null && command -v mpicc > /dev/null; then
  mkdir -p "$work/mpiapp"
  cat > "$work/mpiapp/main.c" <<'C'
#include <ckpt_mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int prov, rank, x, w = 7;
    uint64_t step = 0;
    struct ckpt_mpi mpi;
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ckpt_mpi_init(&mpi, MPI_COMM_WORLD);
    cfg.collective = &mpi.coll;
    if (ckpt_open(&cfg, &ctx)) { printf("open: %s\n", ckpt_errmsg(NULL)); return 1; }
    x = 100 + rank;
    ckpt_protect(ctx, "x", &x, sizeof x);
    ckpt_protect_replicated(ctx, "w", &w, sizeof w, CKPT_ELEM_BYTES);
    if (ckpt_save(ctx, 3) || ckpt_wait(ctx)) return 1;
    x = w = 0;
    if (ckpt_restore(ctx, &step) || x != 100 + rank || w != 7 || step != 3) return 1;
    if (rank == 0) printf("mpi consumer ok: %u ranks\n", ckpt_world_size(ctx));
    ckpt_close(ctx);
    ckpt_mpi_free(&mpi);
    MPI_Finalize();
    return 0;
}
C
  cat > "$work/mpiapp/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(mpiconsumer C)
find_package(ckpt REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
add_executable(mpiconsumer main.c)
target_link_libraries(mpiconsumer PRIVATE ckpt::ckpt MPI::MPI_C)
C
  cmake -S "$work/mpiapp" -B "$work/mpiapp/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
  cmake --build "$work/mpiapp/build" > /dev/null
  CKPT_RUN=mpiconsumer LD_LIBRARY_PATH="$work/prefix/lib" mpirun --allow-run-as-root \
    --oversubscribe -x CKPT_RUN -x CKPT_STORE -x LD_LIBRARY_PATH -np 2 "$work/mpiapp/build/mpiconsumer"
else
  echo "no mpirun/mpicc: the MPI consumer is not built"
fi
# The Python package: under the prefix where Debian's python3 looks for the
# configured one (lib/python3.X/dist-packages for /usr/local, on its
# sys.path), loading the prefix's own libckpt.so with no LD_LIBRARY_PATH.
pydir=$(sed -n 's/^CKPT_PYTHON_DIR:[A-Z]*=//p' "$CKPT_BUILD/CMakeCache.txt")
[[ -f "$work/prefix/$pydir/ckpt/__init__.py" && -f "$work/prefix/$pydir/ckpt/_build.py" ]] ||
  { echo "FAIL: the Python package is not in $work/prefix/$pydir" >&2; exit 1; }
if [[ -x /usr/bin/python3 ]]; then
  prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$CKPT_BUILD/CMakeCache.txt")
  if [[ "$prefix" == /usr/local ]] &&
     ! /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "/usr/local/$pydir"; then
    echo "FAIL: /usr/local/$pydir is not on /usr/bin/python3's sys.path" >&2
    exit 1
  fi
  env -u LD_LIBRARY_PATH -u PYTHONHOME PYTHONPATH="$work/prefix/$pydir" CKPT_RUN=py \
    /usr/bin/python3 -c '
import sys, ckpt, ckpt._lib as L
ckpt.save(5, {"b": b"x" * 3000, "n": (1, None)})
ckpt.wait()
s = ckpt.load()
assert s == {"b": b"x" * 3000, "n": (1, None)}, s
path = L.lib()._name
assert path.startswith(sys.argv[1]), (path, sys.argv[1])
print("python consumer ok:", path)' "$work/prefix/lib/"
fi
echo "installed tree: find_package(ckpt) (shared and static), pkg-config and Python consumers work"
