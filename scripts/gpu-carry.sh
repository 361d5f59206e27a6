#!/usr/bin/env bash
# Unpacks the Debian packages the GPU host's image lacks (yaml-cpp, CLI11, nlohmann-json,
# GoogleTest, Google Benchmark, Eigen, gRPC and protobuf with their dependencies) into .gpu-carry/, which the
# device tool carries beside the tree (`carry: [".gpu-carry"]`) and scripts/gpu-test.sh puts on
# CMAKE_PREFIX_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian libeigen3-dev \
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 \
  protobuf-compiler protobuf-compiler-grpc libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2 \
  libssl-dev libssl3 zlib1g-dev libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1)
rm -rf "$root/.gpu-carry"
mkdir -p "$root/.gpu-carry"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$root/.gpu-carry"; done
# gRPC's CMake config finds RE2 through pkg-config, whose .pc file names /usr: give it a CMake
# config of the carried copy instead (gRPC tries that first).
lib="$root/.gpu-carry/usr/lib/x86_64-linux-gnu"
mkdir -p "$lib/cmake/re2"
cat > "$lib/cmake/re2/re2Config.cmake" <<'CMAKE'
if(NOT TARGET re2::re2)
  add_library(re2::re2 SHARED IMPORTED)
  set_target_properties(re2::re2 PROPERTIES
    IMPORTED_LOCATION "${CMAKE_CURRENT_LIST_DIR}/../../libre2.so"
    INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/../../../../include")
endif()
set(re2_FOUND TRUE)
CMAKE
# The device tool carries 64 MiB at most: drop what the build does not read (documentation,
# static libraries no CMake config names, Eigen's unsupported modules, GoogleMock's headers (no
# test uses them), gRPC's TLS roots and OpenSSL's engines (the server speaks over a Unix socket):
# the tree and this folder came to 64 MB on 2026-12-02, when a GPU call last succeeded without them).
rm -rf "$root/.gpu-carry/usr/share/doc" "$root/.gpu-carry/usr/share/man" "$root/.gpu-carry/usr/include/eigen3/unsupported" \
  "$root/.gpu-carry/usr/include/gmock" "$root/.gpu-carry/usr/share/grpc" "$root/.gpu-carry/usr/share/doc-base" \
  "$root/.gpu-carry/usr/share/lintian" "$root/.gpu-carry/usr/lib/x86_64-linux-gnu/engines-3"
# Eigen: only <Eigen/Dense> is included (common/), on x86: its sparse modules, the bindings to
# other solvers, LAPACKE's header and the other architectures' kernels go (2.8 MB; the tree had
# grown to 18 MB by 2026-12-02 and the two came to 67 MB without this).
# gRPC's unsecure libraries (4.8 MB): nothing links them; their imported targets stay, without the
# check that their files exist.
rm -f "$lib"/libgrpc_unsecure.so* "$lib"/libgrpc++_unsecure.so*
sed -i '/_cmake_import_check_[a-z_]*\(gRPC::\)\?.*grpc\(++\)\?_unsecure/d' "$lib/cmake/grpc/gRPCTargets-none.cmake"
eigen="$root/.gpu-carry/usr/include/eigen3/Eigen/src"
rm -rf "$eigen"/Sparse* "$eigen"/IterativeLinearSolvers "$eigen"/OrderingMethods "$eigen"/*Support \
  "$eigen"/misc/lapacke.h "$eigen"/Core/arch/{NEON,AltiVec,ZVector,MSA,SYCL,SVE,HIP}
keep=$(cat "$lib"/cmake/*/*.cmake | grep -o 'lib[A-Za-z0-9_+.-]*\.a' | sort -u)
for a in "$lib"/*.a; do
  grep -qx "$(basename "$a")" <<< "$keep" || rm -f "$a"
done
# Absolute symlinks in the packages (lib*.so -> /usr/lib/...): relative where the target was
# carried; zlib's development link points at the runtime library every host has.
find "$root/.gpu-carry" -type l | while read -r link; do
  target=$(readlink "$link")
  if [[ $target == /* && -e "$root/.gpu-carry$target" ]]; then
    ln -sfr "$root/.gpu-carry$target" "$link"
  fi
done
ln -sf /lib/x86_64-linux-gnu/libz.so.1 "$lib/libz.so"
du -sh "$root/.gpu-carry"
# The device tool refuses a tree and carry above 64 MiB together. The tree's files (tracked, and
# untracked ones git does not ignore) by 2026-12-02 were 23 MiB, most of it results/ (recorded
# runs and their comparisons), which no GPU run reads (gpu-serve.sh and gpu-test.sh write to
# their OUT_DIR): when the sum is near the limit, move results/gpu and results/validation out of
# the tree for the call and back after it (`git status` clean again), as the calls of 2026-12-02
# 21:19-22:16 UTC did (raw-serve-2026-12-02-load-llm, -replay-azure2019-e, -rate30).
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
  awk '{s += $1} END {printf "%d", s / 1048576}')
carried=$(du -sm --apparent-size "$root/.gpu-carry" | cut -f1)
echo "tree ${tree} MiB + .gpu-carry ${carried} MiB = $((tree + carried)) MiB (the device's limit: 64 MiB)"
if (( tree + carried > 60 )); then
  echo "near the limit: move results/gpu and results/validation out of the tree for the device call" >&2
fi
