#!/usr/bin/env bash
# How `snug serve` stops, on a model slow enough that requests are still running when the
# signal comes (a synthetic 24-layer model of hidden size 1024 with the bundled tokenizer, in a
# temporary directory):
#   - the first SIGTERM drains: /health answers 503 "draining", a new completion 503
#     "draining", while the requests in flight go on;
#   - at the drain's deadline (--drain-seconds 2) what still runs is cut, and told: a stream
#     gets an error event with code "server_shutdown", a JSON request a 503 with it; the
#     server exits 0 and its last line says how it stopped;
#   - a second SIGINT stops at once (not after the drain), the stream told the same way.
# Usage: tests/server/shutdown.sh BUILD_DIR. Prints "ok - ..." / "FAIL - ..." lines and a
# final "N passed, M failed" (see tests/run).
set -u
build=${1:-build}
[[ -d $build ]] && build=$(cd "$build" && pwd)
snug="$build/snug"
cd "$(dirname "$0")/../.." || exit 1 # the repository root: models/, tests/data/
. tests/lib/server.sh

slow=$tmp/slow
if ! "$snug" mkmodel --preset tiny --dtype bf16 --hidden 1024 --heads 16 --kv-heads 4 \
    --intermediate 2816 --layers 24 "$slow" >/dev/null 2>&1; then
    fail "a slow model made" "snug mkmodel failed"
    summary
    exit 1
fi
cp models/stories260K/tokenizer.json models/stories260K/tokenizer_config.json "$slow/"
serve_args="$slow --memory 1GiB --max-model-len 256 --max-num-seqs 4 --max-num-batched-tokens 64 --threads 1"
long='{"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true}'
long_json='{"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true}'

# stream_to FILE JSON: a streaming completion in the background into FILE; sets $cpid.
stream_to() {
    : >"$1"
    curl -sN --max-time 60 -o "$1" -H 'Content-Type: application/json' --data-binary "$2" \
        "$url/v1/completions" &
    cpid=$!
    local i
    for ((i = 0; i < 600; i++)); do [[ -s $1 ]] && break; sleep 0.05; done # its first event
}

# told_shutdown NAME FILE: FILE (a stream) ends with an error event of code server_shutdown.
told_shutdown() {
    local last
    last=$(grep '^data: ' "$2" | tail -1 | sed 's/^data: //')
    if jq -e '.error.code == "server_shutdown" and .error.type == "server_error"' <<<"$last" >/dev/null 2>&1; then
        ok "$1 ($(grep -c '^data: ' "$2") events, the last an error event: server_shutdown)"
    else
        fail "$1" "last event: ${last:0:300}"
    fi
}

# exits_within NAME SECONDS: the server ($pid) exits 0 within SECONDS; $waited says how long.
exits_within() {
    local i rc
    for ((i = 0; i < $2 * 20; i++)); do
        running "$pid" || break
        sleep 0.05
    done
    waited=$((i * 5))
    if running "$pid"; then
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        forget "$pid"
        fail "$1" "still running after $2 s"
        return
    fi
    wait "$pid"
    rc=$?
    forget "$pid"
    if [[ $rc -eq 0 ]]; then ok "$1 (in $((waited / 100)).$((waited % 100 / 10)) s)"; else fail "$1" "exit status $rc"; fi
}

# --- drain, then the deadline ---
start_server drain --drain-seconds 2
stream_to "$tmp/s1" "$long"
s1=$cpid
curl -s --max-time 60 -o "$tmp/j1" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "$long_json" "$url/v1/completions" >"$tmp/j1.status" &
j1=$!
sleep 0.3
kill -TERM "$pid"
sleep 0.3
req /health
if [[ $status == 503 ]] && jq -e '.status == "draining"' "$tmp/body" >/dev/null 2>&1; then
    ok "while draining /health answers 503 draining"
else
    fail "while draining /health answers 503 draining" "HTTP $status" "$(body)"
fi
post /v1/completions '{"prompt": "Once", "max_tokens": 2}'
check_error "while draining a new completion gets 503 draining" 503 null '"draining"'
exits_within "at the drain's deadline (2 s) the server exits 0" 10
wait "$s1" "$j1"
told_shutdown "a stream cut at the deadline is told" "$tmp/s1"
if [[ $(cat "$tmp/j1.status") == 503 ]] && jq -e '.error.code == "server_shutdown"' "$tmp/j1" >/dev/null 2>&1; then
    ok "a JSON request cut at the deadline gets 503 server_shutdown"
else
    fail "a JSON request cut at the deadline gets 503 server_shutdown" "HTTP $(cat "$tmp/j1.status")" "$(head -c 300 "$tmp/j1")"
fi
if grep -q 'draining 2 requests' "$tmp/drain.err" && grep -q "stopped at the drain's deadline, 2 requests cut" "$tmp/drain.err"; then
    ok "the log says it drained 2 requests and cut them at the deadline"
else
    fail "the drain's log lines" "$(tail -3 "$tmp/drain.err")"
fi

# --- a second signal stops at once ---
start_server twice --drain-seconds 60
stream_to "$tmp/s2" "$long"
s2=$cpid
kill -INT "$pid"
sleep 0.3
kill -INT "$pid"
exits_within "a second SIGINT stops at once, not after the 60 s drain" 5
wait "$s2"
told_shutdown "the stream cut by the second signal is told" "$tmp/s2"
if grep -q 'stopped at a second signal, 1 requests cut' "$tmp/twice.err"; then
    ok "the log says it stopped at the second signal"
else
    fail "the second signal's log line" "$(tail -3 "$tmp/twice.err")"
fi

summary
