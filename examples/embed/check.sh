#!/bin/sh
# check.sh PREFIX — builds examples/embed/embed.c against the gspmd installed in PREFIX, once with
# pkg-config and once with CMake's find_package(gspmd), runs both (each partitions a module for
# 4 devices, runs it and verifies it against the reference), and compiles every public header
# as C++17 with g++ -Wall -Werror. Exits non-zero on any failure. `make embed-check` installs
# into a temporary prefix and runs it.
set -eu
prefix=$(cd "${1:?usage: check.sh PREFIX}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libdir=$(dirname "$(find "$prefix" -name gspmd.pc | head -1)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "embed: pkg-config --cflags --libs gspmd"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$here/embed.c" $(pkg-config --cflags --libs gspmd) -o "$work/embed-pc"
"$work/embed-pc"

echo "embed: find_package(gspmd)"
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/embed"

echo "embed: public headers as C++17 (g++ -Wall -Wextra -Werror)"
for h in "$prefix"/include/gspmd/*.h; do
  printf '#include <gspmd/%s>\nint main() { return 0; }\n' "$(basename "$h")" > "$work/h.cpp"
  g++ -std=c++17 -Wall -Wextra -Werror -I"$prefix/include" -c "$work/h.cpp" -o "$work/h.o" \
    || { echo "embed: $(basename "$h") does not compile as C++"; exit 1; }
done
echo "embed: ok"
