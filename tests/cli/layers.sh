#!/usr/bin/env bash
# The layering checks: scripts/check-layers passes on the tree, and it
# fails, naming the file and the line, on each kind of wrong include put into
# a copy of src/; scripts/check-calls finds no two files of src/ that call
# each other in BUILD_DIR's objects, and names the pair and a symbol each way
# in small objects made here. Usage: tests/cli/layers.sh [BUILD_DIR] (default
# build; its objects must be built). Prints "ok - ..." / "FAIL - ..." lines
# and "N passed, M failed".
set -u
build=${1:-build}
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
wrong "layers: base includes nothing above it" base/mem.c '#include "formats/config.h"' \
    "base/ may not include formats/"
wrong "layers: formats may not include tokenizer" formats/gguf.c '  #  include "tokenizer/tokenizer.h"' \
    "formats/ may not include tokenizer/"
wrong "layers: the interpreter's internal header" engine/stop.c '#include "chat/jinja_impl.h"' \
    "jinja_impl.h is internal to chat/"
wrong "layers: the kernels' internal header" cli/main.c '#include "kernels/k_impl.h"' \
    "k_impl.h is internal to kernels/"
wrong "layers: the tokenizer's internal header" chat/chat.c '#include "tokenizer/tok_internal.h"' \
    "tok_internal.h is internal to tokenizer/"
wrong "layers: another folder's header by bare name" model/model.c '#include "mem.h"' \
    '"mem.h" is not in model/'
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

# ---- scripts/check-calls: no two files call each other -------------------------------
out=$(scripts/check-calls "$build" 2>&1)
if [[ $? -eq 0 && "$out" == *"call each other"* && "$out" != *"no two of 0 "* ]]; then
    ok "calls: no two files of src/ call each other"
else
    fail "calls: no two files of src/ call each other" "${out:0:3000}"
fi

# calls NAME FILES...: a fresh tree of small sources under $tmp/c/src (FILE=TEXT, FILE
# relative to src/), each compiled to $tmp/c/build/obj; the check's output into $out, its
# exit status into $rc.
calls() {
    rm -rf "$tmp/c" && mkdir -p "$tmp/c"
    local spec f text
    for spec in "$@"; do
        f=${spec%%=*} text=${spec#*=}
        mkdir -p "$(dirname "$tmp/c/src/$f")" "$(dirname "$tmp/c/build/obj/$f")"
        printf '%s\n' "$text" >"$tmp/c/src/$f"
        cc -c -o "$tmp/c/build/obj/${f%.c}.o" "$tmp/c/src/$f" || return 1
    done
    out=$(scripts/check-calls "$tmp/c/build" "$tmp/c/src" 2>&1)
    rc=$?
}

# found NAME [+TEXT | -TEXT]...: after calls, ok when the check failed with exactly one
# violation and its output holds each +TEXT and no -TEXT.
found() {
    local name=$1 t
    shift
    if [[ $rc -ne 1 ]] || ! grep -qx "check-calls: 1 violation(s)" <<<"$out"; then
        fail "$name" "exit status $rc, expected 1 and one violation" "${out:0:2000}"
        return
    fi
    for t in "$@"; do
        if [[ $t == +* && "$out" != *"${t#+}"* ]] || [[ $t == -* && "$out" == *"${t#-}"* ]]; then
            fail "$name" "output: expected $t" "${out:0:2000}"
            return
        fi
    done
    ok "$name"
}

# A function one way, a read-only table (R) the other: the pair, and a symbol each way.
calls "x/a.c=int b_fn(void); const int a_table[2] = {1, 2}; int a_fn(void) { return b_fn(); }" \
      "x/b.c=extern const int a_table[2]; int b_fn(void) { return a_table[1]; }" \
      "x/c.c=int a_fn(void); int c_fn(void) { return a_fn(); }"
found "calls: two files that call each other are named, with a symbol each way" \
    "+$tmp/c/src/x/a.c <-> $tmp/c/src/x/b.c: x/a.c uses b_fn (defined in x/b.c), x/b.c uses a_table (defined in x/a.c)"

# Writable data (D, B) counts as well; calls one way only do not.
calls "x/a.c=extern int b_count; int a_data = 1; int a_fn(void) { return b_count; }" \
      "x/b.c=extern int a_data; int b_count; int b_fn(void) { return a_data; }" \
      "x/c.c=int a_fn(void); int b_fn(void); int c_fn(void) { return a_fn() + b_fn(); }"
found "calls: shared variables count; calls one way do not" \
    "+x/a.c uses b_count (defined in x/b.c), x/b.c uses a_data (defined in x/a.c)" "-x/c.c"

# A ring of three (a uses b, b uses c, c uses a) is named once, as the path around it; a file
# that only calls into the ring is not in it.
calls "x/a.c=int b_fn(void); int a_fn(void) { return b_fn(); }" \
      "x/b.c=int c_fn(void); int b_fn(void) { return c_fn(); }" \
      "x/c.c=int a_fn(void); int c_fn(void) { return a_fn(); }" \
      "x/d.c=int a_fn(void); int d_fn(void) { return a_fn(); }"
found "calls: a ring of three files is named once, with the symbol of each step" \
    "+$tmp/c/src/x/a.c -> $tmp/c/src/x/b.c -> $tmp/c/src/x/c.c -> $tmp/c/src/x/a.c: a ring of calls (x/a.c uses b_fn, x/b.c uses c_fn, x/c.c uses a_fn)" \
    "-x/d.c"

# The Jinja interpreter's files may call each other, but not another file of chat/.
calls "chat/jinja_a.c=int jinja_b(void); int chat_fn(void); int jinja_a(void) { return jinja_b() + chat_fn(); }" \
      "chat/jinja_b.c=int jinja_a(void); int jinja_b(void) { return jinja_a(); }" \
      "chat/chat.c=int jinja_a(void); int chat_fn(void) { return 0; } int chat_run(void) { return jinja_a(); }"
found "calls: the Jinja interpreter's files are exempt from each other only" \
    "+chat/chat.c <-> $tmp/c/src/chat/jinja_a.c: chat/chat.c uses jinja_a" "-jinja_a.c <-> $tmp/c/src/chat/jinja_b.c"

# A source without its object is reported, not passed over.
calls "x/a.c=int a_fn(void) { return 0; }"
printf 'int d_fn(void) { return 0; }\n' >"$tmp/c/src/x/d.c"
if [[ $rc -eq 0 ]] && out=$(scripts/check-calls "$tmp/c/build" "$tmp/c/src" 2>&1); then
    fail "calls: a source without its object fails" "exit status 0" "${out:0:2000}"
elif [[ "$out" == *"$tmp/c/src/x/d.c: no object $tmp/c/build/obj/x/d.o"* ]]; then
    ok "calls: a source without its object fails"
else
    fail "calls: a source without its object fails" "${out:0:2000}"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
