#!/usr/bin/env bash
# Packaging: `make install` into a temporary prefix (and a DESTDIR), then
# examples/complete.c built outside the tree with `cc app.c $(pkg-config --cflags --libs
# snug)` against the shared library and again against libsnug.a (`pkg-config --static`),
# both run on the bundled model; the soname, the exported symbols (snug.h's functions and
# nothing else), snug.pc's version, and `make uninstall` removing every file it installed.
# make test builds the shared library first, so that install only copies.
# Usage: tests/cli/install.sh BUILD_DIR (the Makefile's build directory: its
# examples/complete is the reference output). Prints "ok - ..." / "FAIL - ..." lines
# and a final "N passed, M failed" (see tests/run).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cc=${CC:-cc}
passed=0 failed=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }
check() { # NAME CONDITION-COMMAND... : ok when the command succeeds
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name" "failed: $*"; fi
}

version=$(sed -n 's/^#define SNUG_VERSION "\(.*\)"/\1/p' "$root/include/snug.h")
major=${version%%.*}
pc() { PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config "$@" snug; }

if out=$(make -C "$root" --no-print-directory install PREFIX="$prefix" 2>&1); then
    ok "make install PREFIX=$prefix"
else
    fail "make install" "${out:0:3000}"
    echo "$passed passed, $failed failed"
    exit 1
fi

for f in bin/snug lib/libsnug.a "lib/libsnug.so.$version" include/snug.h lib/pkgconfig/snug.pc; do
    check "installed $f" test -f "$prefix/$f" -a ! -L "$prefix/$f"
done
check "bin/snug is executable" test -x "$prefix/bin/snug"
check "lib/libsnug.so.$major -> libsnug.so.$version" \
    test "$(readlink "$prefix/lib/libsnug.so.$major")" = "libsnug.so.$version"
check "lib/libsnug.so -> libsnug.so.$major" test "$(readlink "$prefix/lib/libsnug.so")" = "libsnug.so.$major"
check "installed snug.h is the tree's" cmp -s "$prefix/include/snug.h" "$root/include/snug.h"
out=$("$prefix/bin/snug" inspect "$root/models/stories260K" 2>&1)
check "installed snug runs" grep -qF "parameters: 260,032" <<<"$out"

soname=$(readelf -d "$prefix/lib/libsnug.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ "$soname" == "libsnug.so.$major" ]]; then ok "soname libsnug.so.$major"; else
    fail "soname" "readelf -d: SONAME '$soname', expected libsnug.so.$major"; fi

# Exported: exactly the functions snug.h declares (a declaration starts a line with its
# return type); the library's other snug_ functions (snug_hash_bytes, ...) stay inside.
declared=$(grep -E '^[a-z]' "$root/include/snug.h" | grep -oE '\bsnug_[a-z0-9_]+\(' | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$prefix/lib/libsnug.so.$version" | awk '{print $3}' | sort -u)
if [[ -n "$declared" && "$declared" == "$exported" ]]; then
    ok "the .so exports snug.h's $(wc -l <<<"$declared") functions and nothing else"
else
    fail "exported symbols" "declared but not exported: $(comm -23 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')" \
        "exported but not declared: $(comm -13 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')"
fi
if nm "$prefix/lib/libsnug.a" 2>/dev/null | grep -q ' T snug_hash_bytes$' &&
    ! grep -qx snug_hash_bytes <<<"$exported"; then
    ok "an internal function (snug_hash_bytes) is in libsnug.a, not exported by the .so"
else
    fail "internal function hidden" "snug_hash_bytes: expected in libsnug.a and not in the .so's dynamic symbols"
fi

check "pkg-config --modversion snug is $version" test "$(pc --modversion 2>&1)" = "$version"
libs_private=$(grep '^Libs.private:' "$prefix/lib/pkgconfig/snug.pc")
check "snug.pc: Requires.private names the Debian pkg-config modules" \
    grep -qx 'Requires.private: jansson libpcre2-8 libutf8proc libmicrohttpd' "$prefix/lib/pkgconfig/snug.pc"
check "snug.pc: Libs.private has -lm -lpthread" grep -qF -- "-lm -lpthread" <<<"$libs_private"
check "snug.pc: Libs.private has no -fopenmp (the library runs no OpenMP)" bash -c '! grep -qF -- -fopenmp <<<"$1"' _ "$libs_private"
check "snug.pc: prefix is the install prefix" grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/snug.pc"

# The reference: build/examples/complete (linked in the tree). The same seed gives the same
# choices, so the programs built outside the tree must print the same choice lines.
ref=$(cd "$root" && "$build/examples/complete" "$root/models/stories260K" 2>&1)
ref_choices=$(grep '^choice ' <<<"$ref")
if grep -qF "choice 1 (finish length): Once upon a time" <<<"$ref_choices"; then
    ok "reference build/examples/complete runs"
else
    fail "reference build/examples/complete" "${ref:0:2000}"
fi

# run_app NAME BINARY [ENV...]: runs it on the bundled model from outside the tree and
# compares its choices with the reference
run_app() {
    local name=$1 bin=$2 out rc
    shift 2
    out=$(cd "$tmp" && env "$@" "$bin" "$root/models/stories260K" 2>&1)
    rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$name runs" "exit status $rc" "${out:0:2000}"
    elif ! grep -qF "kv blocks 0 of 128 used, 1 requests finished" <<<"$out"; then
        fail "$name runs" "output lacks its counters line" "${out:0:2000}"
    elif [[ -z "$ref_choices" || "$(grep '^choice ' <<<"$out")" != "$ref_choices" ]]; then
        fail "$name prints the reference's choices" "got:" "$(grep '^choice ' <<<"$out")" "expected:" "$ref_choices"
    else
        ok "$name runs on stories260K and prints the reference's two choices"
    fi
}

cp "$root/examples/complete.c" "$tmp/app.c"
# shared: cc app.c $(pkg-config --cflags --libs snug)
if out=$(cd "$tmp" && $cc -o app app.c $(pc --cflags --libs) 2>&1); then
    ok "cc app.c \$(pkg-config --cflags --libs snug)"
    check "app needs libsnug.so.$major" grep -qF "[libsnug.so.$major]" <<<"$(readelf -d "$tmp/app")"
    check "app loads the installed libsnug.so.$major" grep -qF "$prefix/lib/libsnug.so.$major" \
        <<<"$(LD_LIBRARY_PATH=$prefix/lib ldd "$tmp/app")"
    run_app "app (shared)" "$tmp/app" LD_LIBRARY_PATH="$prefix/lib"
else
    fail "cc app.c \$(pkg-config --cflags --libs snug)" "${out:0:3000}"
fi

# static: pkg-config --static gives Libs.private and the Requires.private modules' libraries;
# with libsnug.so next to libsnug.a the linker would take the .so for -lsnug, so the
# archive is named (-l:libsnug.a)
static_libs=$(pc --static --libs)
static_libs=${static_libs/-lsnug/-l:libsnug.a}
if out=$(cd "$tmp" && $cc -o app_static app.c $(pc --static --cflags) $static_libs 2>&1); then
    ok "cc app.c \$(pkg-config --static --cflags --libs snug) with libsnug.a"
    check "app_static does not need libsnug.so" test -z "$(readelf -d "$tmp/app_static" | grep libsnug)"
    run_app "app_static" "$tmp/app_static"
else
    fail "static link with pkg-config --static" "$static_libs" "${out:0:3000}"
fi

if out=$(make -C "$root" --no-print-directory uninstall PREFIX="$prefix" 2>&1); then
    left=$(find "$prefix" ! -type d)
    if [[ -z "$left" ]]; then ok "make uninstall removes every installed file"; else
        fail "make uninstall" "left:" "$left"; fi
else
    fail "make uninstall" "${out:0:2000}"
fi

# DESTDIR: files staged under it, snug.pc naming the final prefix
if out=$(make -C "$root" --no-print-directory install DESTDIR="$tmp/stage" PREFIX=/opt/snug 2>&1); then
    check "DESTDIR install stages lib/libsnug.so.$version" test -f "$tmp/stage/opt/snug/lib/libsnug.so.$version"
    check "DESTDIR install: snug.pc's prefix is PREFIX" grep -qx "prefix=/opt/snug" \
        "$tmp/stage/opt/snug/lib/pkgconfig/snug.pc"
    make -C "$root" --no-print-directory uninstall DESTDIR="$tmp/stage" PREFIX=/opt/snug >/dev/null 2>&1
    check "DESTDIR uninstall" test -z "$(find "$tmp/stage" ! -type d)"
else
    fail "make install DESTDIR=... PREFIX=/opt/snug" "${out:0:2000}"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
