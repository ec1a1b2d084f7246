#!/usr/bin/env bash
# snug serve driven by real clients: the official openai npm package (client.test.mjs, and
# responses.test.mjs on the Responses API), the official Anthropic one, @anthropic-ai/sdk, on
# the Messages API (anthropic.test.mjs) and a browser, Debian's chromium driven by
# puppeteer-core (page.test.mjs), all pinned in package-lock.json, with Node's own test runner;
# reasoning.test.mjs drives the openai client and the browser against a thinking model (a small
# Qwen3 on a server of its own).
# Usage: tests/client/client.sh BUILD_DIR. Installs the clients with npm ci only when
# node_modules is missing or older than package-lock.json (so it needs no network once
# installed), starts BUILD_DIR/snug serve on a free port with --api-key, runs the tests and
# prints "ok - ..." / "FAIL - ..." lines (a failure's details indented under it) and a final
# "N passed, M failed"; exit status 1 if any failed (see tests/run).
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# BUILD_DIR is relative to the caller's directory
[[ "$build" == /* ]] || build="$PWD/$build"
snug="$build/snug"
api_key=test-key
tmp=$(mktemp -d)
server_pid=
passed=0 failed=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/  /'; done; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [[ $failed -eq 0 ]]; exit; }

# shellcheck disable=SC2317 # (run by the trap)
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    fail "node and npm are needed"
    finish
fi

# the clients: npm ci only when node_modules is missing one or is older than the lock file
if [[ ! -d "$here/node_modules/openai" || ! -d "$here/node_modules/@anthropic-ai/sdk" ||
    ! -d "$here/node_modules/puppeteer-core" || "$here/package-lock.json" -nt "$here/node_modules" ]]; then
    if (cd "$here" && npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1; then
        touch "$here/node_modules"
    else
        fail "npm ci (the openai and Anthropic clients, puppeteer-core)" "$(tail -n 20 "$tmp/npm.log")"
        finish
    fi
fi

# the server, on a free port; its "serving ... on http://HOST:PORT" line gives the address.
cd "$root" || exit 1
if [[ ! -x "$snug" ]]; then
    fail "$snug is built"
    finish
fi
: >"$tmp/server.out" # before the background start, whose redirection may come late
"$snug" serve --port 0 --memory 256MiB --max-model-len 256 --api-key "$api_key" \
    --chat-template tests/data/chat/tinyllama-1.1b-chat.jinja --embeddings >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
url=
for _ in $(seq 300); do
    url=$(sed -n 's/^serving .* on \(http:\/\/[^ ]*\).*$/\1/p' "$tmp/server.out" | head -n 1)
    [[ -n "$url" ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z "$url" ]]; then
    if kill -0 "$server_pid" 2>/dev/null; then why="no serving line in 30 s"; else wait "$server_pid"; why="exited with status $?"; fi
    fail "snug serve starts" "$why" "$(tail -n 20 "$tmp/server.out"; tail -n 20 "$tmp/server.err")"
    finish
fi
ok "snug serve starts ($url)"

# the tests: node's TAP, turned into ok/FAIL lines
# client.test.mjs, responses.test.mjs and anthropic.test.mjs: this server (SNUG_BASE_URL ends in
# /v1; the Anthropic SDK is given the origin and appends /v1/messages itself)
# page.test.mjs: the page at / in Debian's chromium (its own server; the screenshot it takes
# mid-stream goes to BUILD_DIR/test-artifacts)
# One file at a time (--test-concurrency=1, as on 2 cores anyway): client.test.mjs waits for
# the server's gauges to settle and counts its tokens, which another file's requests on the
# same server would move.
if [[ ! -x /usr/bin/chromium && -z "${CHROMIUM:-}" ]]; then
    fail "chromium is installed (scripts/install-deps --browser)"
fi
(cd "$here" && SNUG_BASE_URL="$url/v1" SNUG_API_KEY="$api_key" SNUG_BUILD="$build" \
    SNUG_ARTIFACTS="$build/test-artifacts" \
    timeout 240 node --test --test-concurrency=1 --test-reporter=tap client.test.mjs responses.test.mjs \
        anthropic.test.mjs page.test.mjs reasoning.test.mjs) >"$tmp/tap" 2>&1
node_rc=$?
awk '
    function unescape(s) { gsub(/\\#/, "#", s); gsub(/\\\\/, "\\", s); return s }
    /^ok [0-9]+ - / { sub(/^ok [0-9]+ - /, ""); print "ok - " unescape($0); next }
    /^not ok [0-9]+ - / { sub(/^not ok [0-9]+ - /, ""); print "FAIL - " unescape($0); yaml = 1; skip = 0; n = 0; next }
    yaml && /^  \.\.\.$/ { yaml = 0; next }
    yaml && /^  ---$/ { next }
    # the YAML block under a failure, less its bookkeeping and the stack
    yaml && /^  [A-Za-z_]+:/ { skip = ($0 ~ /^  (duration_ms|failureType|code|name|operator|stack):/) }
    yaml && skip { next }
    yaml { if (++n <= 40) print "  " substr($0, 3); else if (n == 41) print "    ..."; next }
' "$tmp/tap" >"$tmp/results"
cat "$tmp/results"
passed=$((passed + $(grep -c '^ok - ' "$tmp/results")))
failed=$((failed + $(grep -c '^FAIL - ' "$tmp/results")))
n_tests=$(sed -n 's/^# tests \([0-9]*\)$/\1/p' "$tmp/tap")
if ! grep -qE '^1\.\.[0-9]+$' "$tmp/tap" || [[ -z "$n_tests" || "$n_tests" -eq 0 ]] ||
    { [[ $node_rc -ne 0 ]] && ! grep -q '^FAIL - ' "$tmp/results"; }; then
    fail "node --test ran every test (status $node_rc)" "$(grep -vE '^(ok|not ok) [0-9]+ - ' "$tmp/tap" | tail -n 30)"
fi

# the server stops cleanly: still running after the tests, exit status 0 on SIGTERM
if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid"
    fail "snug serve ran until stopped" "exited with status $? during the tests" "$(tail -n 20 "$tmp/server.err")"
else
    kill -TERM "$server_pid"
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$server_pid" 2>/dev/null; then
        fail "snug serve exits 0 on SIGTERM" "still running 10 s after SIGTERM" "$(tail -n 20 "$tmp/server.err")"
    else
        wait "$server_pid"
        rc=$?
        if [[ $rc -eq 0 ]]; then ok "snug serve exits 0 on SIGTERM"; else fail "snug serve exits 0 on SIGTERM" "exit status $rc" "$(tail -n 20 "$tmp/server.err")"; fi
    fi
fi
server_pid=
finish
