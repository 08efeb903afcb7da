#!/usr/bin/env bash
# CTest: installs the build tree to a temporary prefix and uses it as a user would: every installed
# header compiles on its own with -Wall -Wextra -Werror; example 5 (find_package) builds example 1
# with -Werror and runs it; so does a plain g++ line from pkg-config; a version the package does
# not provide is refused.
#   usage: check_install.sh BUILD_DIR WORK_DIR CXX LIBDIR [SANITIZE_FLAGS]
# CXX is the build's compiler, LIBDIR its CMAKE_INSTALL_LIBDIR (lib, lib64, lib/<triplet>).
set -euo pipefail
build=$1 work=$2 cxx=$3 libdir=$4 sanitize=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
rm -rf "$work" && mkdir -p "$work"
step() { printf '== %s\n' "$*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
[[ -f $prefix/include/tapestry/tapestry.h ]] || { echo "no tapestry/tapestry.h installed"; exit 1; }

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
cflags=$(pkg-config --cflags tapestry)
libs=$(pkg-config --libs tapestry)
version=$(pkg-config --modversion tapestry)
step "pkg-config --modversion tapestry: $version"

step "every installed header compiles alone with -Wall -Wextra -Werror"
headers=$(cd "$prefix/include" && find tapestry -name '*.h' | sort)
count=$(wc -w <<<"$headers")
# shellcheck disable=SC2086
printf '%s\n' $headers | xargs -P "$(nproc)" -I{} sh -c \
  "printf '#include <{}>\n' | '$cxx' -std=c++20 -Wall -Wextra -Werror -fsyntax-only $cflags -x c++ - \
   || { echo 'header {} does not compile alone'; exit 255; }"
echo "$count headers"

step "example 5: find_package(Tapestry) builds example 1 with -Werror"
cmake -S "$here/5_consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror $sanitize" >"$work/consumer.log"
cmake --build "$work/consumer" >>"$work/consumer.log" || { cat "$work/consumer.log"; exit 1; }
"$work/consumer/xor"

step "a compiler line with pkg-config's flags builds example 1 with -Werror"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -Wall -Wextra -Werror $sanitize "$here/1_xor.cpp" -o "$work/xor_pc" $cflags $libs
"$work/xor_pc" | tail -n 1

step "find_package(Tapestry 99) is refused by the version file"
mkdir -p "$work/wrong_version"
cat >"$work/wrong_version/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.21)
project(wrong_version LANGUAGES CXX)
find_package(Tapestry 99 REQUIRED)
CMAKE
if cmake -S "$work/wrong_version" -B "$work/wrong_version/build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/wrong_version.log" 2>&1; then
  echo "find_package(Tapestry 99) was accepted"
  exit 1
fi
grep -qF "version: $version" "$work/wrong_version.log"
echo "refused: $(grep -m1 "compatible with" "$work/wrong_version.log" | sed "s/^ *//")"
echo "install check passed"
