#!/usr/bin/env bash
# The layering check (scripts/check-layers): it passes on the tree, and it
# fails, naming the file and the line, on each kind of wrong include put into
# a copy of src/. Usage: tests/cli/layers.sh [BUILD_DIR] (the build is not
# used). Prints "ok - ..." / "FAIL - ..." lines and "N passed, M failed".
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }

out=$(scripts/check-layers 2>&1)
if [[ $? -eq 0 && "$out" == *"follow src/README.md"* ]]; then
    ok "layers: the tree passes"
else
    fail "layers: the tree passes" "${out:0:3000}"
fi

# wrong NAME FILE LINE_TEXT PATTERN: LINE_TEXT appended to FILE (relative to
# src/) of a fresh copy makes the check fail with "src/FILE:N: ...PATTERN...".
wrong() {
    local name=$1 file=$2 text=$3 pattern=$4
    rm -rf "$tmp/src" && cp -r src "$tmp/src"
    printf '%s\n' "$text" >>"$tmp/src/$file"
    local line out rc
    line=$(wc -l <"$tmp/src/$file")
    out=$(scripts/check-layers "$tmp/src" 2>&1)
    rc=$?
    if [[ $rc -ne 1 ]]; then
        fail "$name" "exit status $rc, expected 1" "${out:0:2000}"
    elif ! grep -qF -- "$tmp/src/$file:$line: " <<<"$out"; then
        fail "$name" "output does not name $file:$line" "${out:0:2000}"
    elif ! grep -qF -- "$pattern" <<<"$out"; then
        fail "$name" "output lacks: $pattern" "${out:0:2000}"
    elif ! grep -qx "check-layers: 1 violation(s)" <<<"$out"; then
        fail "$name" "expected exactly one violation" "${out:0:2000}"
    else
        ok "$name"
    fi
}

wrong "layers: model may not include engine" model/kvcache.c '#include "engine/sampler.h"' \
    "model/ may not include engine/"
wrong "layers: base includes nothing above it" base/device.c '#include "formats/config.h"' \
    "base/ may not include formats/"
wrong "layers: formats may not include tokenizer" formats/gguf.c '  #  include "tokenizer/tokenizer.h"' \
    "formats/ may not include tokenizer/"
wrong "layers: the interpreter's internal header" engine/stop.c '#include "chat/jinja_impl.h"' \
    "jinja_impl.h is internal to chat/"
wrong "layers: the kernels' internal header" cli/main.c '#include "kernels/k_impl.h"' \
    "k_impl.h is internal to kernels/"
wrong "layers: the tokenizer's internal header" chat/chat.c '#include "tokenizer/tok_internal.h"' \
    "tok_internal.h is internal to tokenizer/"
wrong "layers: another folder's header by bare name" model/model.c '#include "device.h"' \
    '"device.h" is not in model/'
wrong "layers: own folder by bare name" base/json.c '#include "base/common.h"' \
    "own headers are included by bare name"
wrong "layers: no such header" engine/engine.h '#include "model/nope.h"' \
    '"model/nope.h": no such header'
wrong "layers: unknown folder" tokenizer/regex.c '#include "pcre/pcre2.h"' \
    "pcre/ is not a folder of the layering table"

# A folder without a row and a README, and a file outside the folders.
rm -rf "$tmp/src" && cp -r src "$tmp/src"
mkdir "$tmp/src/newpart" && printf '#include "engine/engine.h"\n' >"$tmp/src/newpart/x.c"
touch "$tmp/src/loose.c"
out=$(scripts/check-layers "$tmp/src" 2>&1)
rc=$?
if [[ $rc -eq 1 && "$out" == *"src/newpart: folder has no row"* && "$out" == *"src/newpart: folder has no README.md"* &&
      "$out" == *"src/loose.c: source files belong in a subsystem's folder"* ]]; then
    ok "layers: a new folder needs a row and a README"
else
    fail "layers: a new folder needs a row and a README" "exit status $rc" "${out:0:2000}"
fi

# The table is the rule: giving model/ the right to include engine/ makes that include pass.
rm -rf "$tmp/src" && cp -r src "$tmp/src"
printf '#include "engine/sampler.h"\n' >>"$tmp/src/model/kvcache.c"
sed -i 's/^| `model` | /| `model` | `engine` /' "$tmp/src/README.md"
if out=$(scripts/check-layers "$tmp/src" 2>&1); then
    ok "layers: the check reads its rule from src/README.md"
else
    fail "layers: the check reads its rule from src/README.md" "${out:0:2000}"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
