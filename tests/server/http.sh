#!/usr/bin/env bash
# HTTP tests of `snug serve` on the bundled models/stories260K: every class of bad request
# (status and OpenAI error shape, and a good request still served after each group), the API
# key, the raw server-sent-event bytes of streams, greedy decoding over HTTP against
# `snug generate`, n > 1 and seeds, a chat after a tool call and the 400s of a chat template
# that fails, a stream the client aborts (the engine lets go of its sequences and blocks),
# prefix caching (cached_tokens, cache_salt, /reset_prefix_cache, --no-prefix-caching), speculative
# decoding (--prompt-lookup, the request's opt-out, its /metrics), and SIGTERM. Uses bash, curl,
# jq and coreutils.
# Usage: tests/server/http.sh BUILD_DIR. Prints "ok - ..." / "FAIL - ..." lines
# and a final "N passed, M failed" (see tests/run); exit status 1 if any failed.
set -u
build=${1:-build}
[[ -d $build ]] && build=$(cd "$build" && pwd)
snug="$build/snug"
cd "$(dirname "$0")/../.." || exit 1 # the repository root: models/, tests/data/
. tests/lib/server.sh

model_len=256
template=tests/data/chat/tinyllama-1.1b-chat.jinja
# one thread for the servers and generate: these are tests of HTTP, not of the kernels, and a
# thread pool on a loaded machine (tests running beside these) makes every step slow; greedy
# output does not depend on the thread count
threads=1

# bad NAME STATUS PARAM CODE PATH JSON [CURL_ARGS...]: POST JSON to PATH, expect that error.
bad() {
    local name=$1 want=$2 param=$3 code=$4 path=$5 json=$6; shift 6
    post "$path" "$json" "$@"
    check_error "$name" "$want" "$param" "$code"
}
badc() { bad "$1" "$2" "$3" "$4" /v1/completions "$5"; } # a completion body
badch() { bad "$1" "$2" "$3" "$4" /v1/chat/completions "$5"; } # a chat body

# still_serves GROUP [CURL_ARGS...]: a good completion after a group of bad requests.
still_serves() {
    local group=$1; shift
    post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 4}' "$@"
    if [[ $status == 200 ]] && jq -e '.choices[0].text | type == "string"' "$tmp/body" >/dev/null 2>&1; then
        ok "a good request after $group"
    else
        fail "a good request after $group" "HTTP $status" "$(body)"
    fi
}
# good NAME PATH JSON: a 200 answer with choices[0].text (a chat's .message.content) a string.
good() {
    post "$2" "$3"
    if [[ $status == 200 && $ctype == application/json* ]] &&
        jq -e '.choices[0] | (.text // .message.content) | type == "string"' "$tmp/body" >/dev/null 2>&1; then
        ok "$1"
    else
        fail "$1" "HTTP $status, Content-Type '$ctype'" "$(body)"
    fi
}
# metric NAME: the value of an unlabelled metric in /metrics.
metric() { curl -s --max-time 5 "$url/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

start_server main --chat-template "$template"

# the KV cache is made resident as serving begins: "reserve" before ready, "resident" after,
# and then every block is resident, counted free
phases_of() { sed -n 's/^snug: \[ *[0-9.]* s\] \([a-z-]*\).*/\1/p' "$tmp/$1.err" | tr '\n' ' '; }
for ((i = 0; i < 100; i++)); do grep -q '] resident' "$tmp/main.err" && break; sleep 0.1; done
resident=$(metric snug_kv_blocks_resident) kv_free=$(metric snug_kv_blocks_free)
if [[ $(phases_of main) == "load reset profile plan reserve ready resident " && -n $resident &&
    $resident -gt 0 && $resident == "$kv_free" ]] && grep -q 'kv cache made resident as serving begins' "$tmp/main.out"; then
    ok "the KV cache made resident after ready: $resident blocks, all free"
else
    fail "the KV cache made resident after ready" "phases '$(phases_of main)', resident '$resident', free '$kv_free'"
fi

# the first response's id, to compare with another server's (ids differ across restarts)
post /v1/completions '{"prompt": "Once", "max_tokens": 1}'
first_id_main=$(jq -r '.id' "$tmp/body")
req /nope
# an address in use fails at once, before loading anything
busy_port=${url##*:}
t0=$(date +%s%N)
"$snug" serve --port "$busy_port" --memory 256MiB >"$tmp/busy.out" 2>"$tmp/busy.err"
busy_rc=$? busy_ms=$((($(date +%s%N) - t0) / 1000000))
if [[ $busy_rc == 1 && $busy_ms -lt 2000 ]] && grep -q "cannot listen on 127.0.0.1:$busy_port: Address already in use" "$tmp/busy.err" &&
    ! grep -q 'loaded weights' "$tmp/busy.out"; then
    ok "a port in use fails before loading (exit 1 in $busy_ms ms)"
else
    fail "a port in use fails before loading" "exit $busy_rc in $busy_ms ms" "$(cat "$tmp/busy.err" "$tmp/busy.out" | head -3)"
fi
req /v1/models/stories260K
models_one=$status
req /v1/models/nope
check_error "GET /v1/models/ID of another model -> 404" 404 '"model"' '"model_not_found"'
if [[ $models_one == 200 ]]; then ok "GET /v1/models/stories260K"; else fail "GET /v1/models/stories260K" "HTTP $models_one"; fi
no_cors=$(curl -si --max-time 5 -H 'Origin: http://page.example' "$url/health" | grep -ci '^access-control')
req /v1/completions -X OPTIONS -H 'Origin: http://page.example'
if [[ $no_cors == 0 && $status == 405 ]]; then ok "without --allowed-origins: no CORS headers, OPTIONS 405"; else fail "no CORS without --allowed-origins" "$no_cors headers, OPTIONS $status"; fi
req /version
if [[ $status == 200 ]] && jq -e '(.version | test("^[0-9]+\\.[0-9]+\\.[0-9]+$")) and (.commit | type == "string")
        and (.isa | type == "string") and .isa == .kernels.isa and (.mpi | type == "boolean") and .tensor_parallel_size == 1
        and (.kernels.isa | type == "string") and .kernels.threads >= 1 and .kernels.weight_dtype == "F32"
        and (.kernels.matmul | test("^vfmadd231ps [yz]mm$|^scalar$")) and (.kernels.matvec | type == "string")
        and (.kernels.calibration_gflops | type == "object")' "$tmp/body" >/dev/null; then
    ok "GET /version: $(head -c 200 "$tmp/body")"
else
    fail "GET /version" "HTTP $status" "$(body)"
fi
# the page at / (built in), what it polls (/v1/memory) and the timeline (not recorded here)
req /
if [[ $status == 200 && $ctype == "text/html; charset=utf-8" ]] && cmp -s "$tmp/body" src/server/page/index.html &&
    curl -sI --max-time 5 "$url/" | tr -d '\r' | grep -q "^Content-Security-Policy: default-src 'none'"; then
    ok "GET /: the page, byte for byte src/server/page/index.html, with a Content-Security-Policy"
else
    fail "GET /" "HTTP $status, Content-Type '$ctype'" "$(head -c 200 "$tmp/body")"
fi
req /v1/memory
if [[ $status == 200 ]] && jq -e --argjson tot "$(metric snug_kv_blocks_resident)" '
        .object == "memory" and .model == "stories260K" and .max_model_len > 0
        and ([.plan[].part] == ["weights", "activations", "serving_state", "untracked", "reserve", "kv_cache"])
        and ([.plan[].bytes] | add) <= .budget_bytes and (.plan[] | .bytes > 0)
        and .kv.blocks_total > 0 and .kv.blocks_resident == $tot and .kv.blocks_used == 0 and .kv.block_tokens == 16
        and .kv.block_bytes * .kv.blocks_total <= (.plan[] | select(.part == "kv_cache") | .bytes)
        and .process.resident_bytes > 0 and .process.resident_peak_bytes >= .process.resident_bytes
        and .process.resident_peak_bytes <= .budget_bytes and .sequences.running == 0 and .timeline == false' \
        "$tmp/body" >/dev/null; then
    ok "GET /v1/memory: the plan's parts within the budget, the KV blocks as /metrics has them, the resident set"
else
    fail "GET /v1/memory" "HTTP $status" "$(body)"
fi
req /timeline.svg
check_error "GET /timeline.svg without --timeline -> 404" 404 null '"not_found"'
rid_new=$(curl -si --max-time 5 "$url/health" | tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
rid_new2=$(curl -si --max-time 5 "$url/health" | tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
rid_given=$(curl -si --max-time 20 -H 'X-Request-Id: client-7' "$url/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt": "Once", "max_tokens": 1, "stream": true}' |
    tr -d '\r' | sed -n 's/^[Xx]-[Rr]equest-[Ii]d: //p')
if [[ $rid_new =~ ^req-[0-9a-f]{16}$ && $rid_new2 =~ ^req-[0-9a-f]{16}$ && $rid_new != "$rid_new2" && $rid_given == client-7 ]]; then
    ok "X-Request-Id: new ones differ ($rid_new, $rid_new2); a client's comes back on a stream ($rid_given)"
else
    fail "X-Request-Id" "new '$rid_new' '$rid_new2', given back '$rid_given'"
fi

# --- plain endpoints ---
req /health
if [[ $status == 200 ]]; then ok "GET /health 200"; else fail "GET /health 200" "HTTP $status" "$(body)"; fi
req /v1/models
if [[ $status == 200 ]] && jq -e '.object == "list" and .data[0].id == "stories260K"' "$tmp/body" >/dev/null; then
    ok "GET /v1/models"
else
    fail "GET /v1/models" "HTTP $status" "$(body)"
fi
good "a completion" /v1/completions '{"prompt": "Once upon a time", "max_tokens": 8}'
req /nope
check_error "404 for an unknown path" 404 null '"not_found"'
req /v1/nope -X POST -d '{}'
check_error "404 for an unknown /v1 path" 404 null '"not_found"'
req /v1/completions
check_error "405 for GET /v1/completions" 405 null '"method_not_allowed"'
req /v1/chat/completions
check_error "405 for GET /v1/chat/completions" 405 null '"method_not_allowed"'
req /v1/models -X POST -H 'Content-Type: application/json' -d '{}'
check_error "405 for POST /v1/models" 405 null '"method_not_allowed"'
still_serves "404s and 405s"

# --- bodies that are not a JSON object ---
badc "body not JSON" 400 null null 'nope'
badc "body a JSON array [1]" 400 null null '[1]'
badc "body a JSON string \"x\"" 400 null null '"x"'
badc "body a JSON number 3" 400 null null '3'
badc "body truncated JSON" 400 null null '{"prompt": "a"'
badc "body JSON with trailing garbage" 400 null null '{"prompt": "a"} x'
req /v1/completions -X POST -H 'Content-Type: application/json'
check_error "empty body" 400 null null
printf '{"prompt": "Once upon a \xff\xfe time", "max_tokens": 2}' >"$tmp/badutf8.json"
req /v1/completions -H 'Content-Type: application/json' --data-binary @"$tmp/badutf8.json"
check_error "invalid UTF-8 in a string" 400 null null
printf '{"prompt": "a", "\xc3\x28": 1}' >"$tmp/badutf8key.json"
req /v1/completions -H 'Content-Type: application/json' --data-binary @"$tmp/badutf8key.json"
check_error "invalid UTF-8 in a key" 400 null null
printf '{"messages": [{"role": "user", "content": "hi \xed\xa0\x80"}]}' >"$tmp/badutf8chat.json"
req /v1/chat/completions -H 'Content-Type: application/json' --data-binary @"$tmp/badutf8chat.json"
check_error "invalid UTF-8 (a UTF-8-encoded surrogate) in chat content" 400 null null
still_serves "bodies that are not JSON objects"

# --- wrong types, field by field ---
badc "prompt a number" 400 '"prompt"' null '{"prompt": 3}'
badc "prompt an object" 400 '"prompt"' null '{"prompt": {}}'
badc "prompt missing" 400 '"prompt"' null '{"max_tokens": 2}'
badc "max_tokens a string" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": "5"}'
badc "max_tokens a float" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": 1.5}'
badc "temperature a string" 400 '"temperature"' null '{"prompt": "a", "temperature": "1"}'
badc "top_p a bool" 400 '"top_p"' null '{"prompt": "a", "top_p": true}'
badc "top_k a float" 400 '"top_k"' null '{"prompt": "a", "top_k": 1.5}'
badc "n a string" 400 '"n"' null '{"prompt": "a", "n": "2"}'
badc "stream a string" 400 '"stream"' null '{"prompt": "a", "stream": "yes"}'
badc "stop a number" 400 '"stop"' null '{"prompt": "a", "stop": 3}'
badch "messages an object" 400 '"messages"' null '{"messages": {}}'
badc "seed a string" 400 '"seed"' null '{"prompt": "a", "seed": "1"}'
badc "logit_bias a list" 400 '"logit_bias"' null '{"prompt": "a", "logit_bias": [1]}'
badc "stop_token_ids a string" 400 '"stop_token_ids"' null '{"prompt": "a", "stop_token_ids": "1"}'
badc "echo a number" 400 '"echo"' null '{"prompt": "a", "echo": 1}'
badc "ignore_eos a string" 400 '"ignore_eos"' null '{"prompt": "a", "ignore_eos": "true"}'
badc "stream_options a number" 400 '"stream_options"' null '{"prompt": "a", "stream_options": 3}'
badc "model a number" 400 '"model"' null '{"prompt": "a", "model": 3}'
badch "max_tokens a string (chat)" 400 '"max_tokens"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "x"}'
still_serves "fields of the wrong type"

# --- messages ---
badch "messages missing" 400 '"messages"' null '{"max_tokens": 2}'
badch "messages empty" 400 '"messages"' null '{"messages": []}'
badch "messages with an unknown role" 400 '"messages[0].role"' null '{"messages": [{"role": "wizard", "content": "hi"}]}'
badch "a user message with null content" 400 '"messages[0].content"' null '{"messages": [{"role": "user", "content": null}]}'
badch "a message that is not an object" 400 '"messages[0]"' null '{"messages": [3]}'
badch "a message without a role" 400 '"messages[0].role"' null '{"messages": [{"content": "hi"}]}'
badch "a tool call's arguments not a string" 400 '"messages[0].tool_calls[0].function.arguments"' null \
    '{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "calc", "arguments": null}}]}]}'
# what every OpenAI client sends after a tool call: the assistant's content null beside its
# tool_calls, then the tool's answer; TinyLlama's template adds the content to a string, so it
# must get "" (the prompt is the one rendered with "": the tool's message it leaves out)
tool_turn='{"messages": [{"role": "user", "content": "What is 6*7?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "calc", "arguments": "{\"e\": \"6*7\"}"}}]},
    {"role": "tool", "tool_call_id": "x", "content": "42"}, {"role": "user", "content": "thanks"}], "max_tokens": 2}'
n_tool_turn=$("$snug" tokenize models/stories260K --special --no-bos \
    $'<|user|>\nWhat is 6*7?</s>\n<|assistant|>\n</s>\n<|user|>\nthanks</s>\n<|assistant|>\n' | wc -w)
post /v1/chat/completions "$tool_turn"
if [[ $status == 200 ]] && jq -e --argjson n "$n_tool_turn" '(.choices[0].message.content | type == "string")
        and .usage.prompt_tokens == $n' "$tmp/body" >/dev/null 2>&1; then
    ok "a chat after a tool call (the assistant's content null): 200, the prompt rendered with \"\" ($n_tool_turn tokens)"
else
    fail "a chat after a tool call (the assistant's content null)" "HTTP $status, want $n_tool_turn prompt tokens" "$(body)"
fi
good "a chat completion still works" /v1/chat/completions \
    '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
if jq -e '.object == "chat.completion" and (.choices[0].message.content | type == "string")
          and .choices[0].message.role == "assistant"' "$tmp/body" >/dev/null 2>&1; then
    ok "chat completion shape"
else
    fail "chat completion shape" "$(body)"
fi
still_serves "bad messages"

# --- values out of range ---
badc "max_tokens 0" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": 0}'
badc "max_tokens negative" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": -1}'
badc "max_tokens huge (1e9)" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": 1e9}'
badc "max_tokens huge (1000000000)" 400 '"max_tokens"' null '{"prompt": "a", "max_tokens": 1000000000}'
badc "temperature negative" 400 '"temperature"' null '{"prompt": "a", "temperature": -0.5}'
badc "temperature above 2" 400 '"temperature"' null '{"prompt": "a", "temperature": 2.5}'
badc "top_p 0" 400 '"top_p"' null '{"prompt": "a", "top_p": 0}'
badc "top_p above 1" 400 '"top_p"' null '{"prompt": "a", "top_p": 1.5}'
badc "top_k below -1" 400 '"top_k"' null '{"prompt": "a", "top_k": -2}'
badc "frequency_penalty below -2" 400 '"frequency_penalty"' null '{"prompt": "a", "frequency_penalty": -2.5}'
badc "frequency_penalty above 2" 400 '"frequency_penalty"' null '{"prompt": "a", "frequency_penalty": 2.5}'
badc "presence_penalty below -2" 400 '"presence_penalty"' null '{"prompt": "a", "presence_penalty": -2.5}'
badc "presence_penalty above 2" 400 '"presence_penalty"' null '{"prompt": "a", "presence_penalty": 2.5}'
badc "repetition_penalty 0" 400 '"repetition_penalty"' null '{"prompt": "a", "repetition_penalty": 0}'
badc "repetition_penalty negative" 400 '"repetition_penalty"' null '{"prompt": "a", "repetition_penalty": -1}'
badc "n 0" 400 '"n"' null '{"prompt": "a", "n": 0}'
badc "n huge (1000)" 400 '"n"' null '{"prompt": "a", "n": 1000}'
badc "more than 4 stop strings" 400 '"stop"' null '{"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}'
badc "an empty stop string" 400 '"stop"' null '{"prompt": "a", "stop": ""}'
badc "an empty stop string in a list" 400 '"stop[1]"' null '{"prompt": "a", "stop": ["x", ""]}'
badc "a negative prompt token id" 400 '"prompt[1]"' null '{"prompt": [1, -1]}'
badc "a prompt token id >= the vocabulary (512)" 400 '"prompt[1]"' null '{"prompt": [1, 512]}'
badc "a stop_token_id >= the vocabulary" 400 '"stop_token_ids[0]"' null '{"prompt": "a", "stop_token_ids": [512]}'
badc "a logit_bias key that is no token id" 400 '"logit_bias"' null '{"prompt": "a", "logit_bias": {"abc": 1}}'
badc "logprobs above 20" 400 '"logprobs"' null '{"prompt": "a", "logprobs": 21}'
badch "top_logprobs above 20" 400 '"top_logprobs"' null '{"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 21}'
# logprobs: one entry per token, its alternatives most likely first, greedy takes the first
post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "logprobs": 3}'
if [[ $status == 200 ]] && jq -e '.choices[0].logprobs as $l | ($l.tokens | length) == 5 and
        ($l.token_logprobs | length) == 5 and ($l.top_logprobs | length) == 5 and
        ($l.text_offset | length) == 5 and ($l.tokens | join("")) == .choices[0].text and
        all($l.token_logprobs[]; . <= 0) and
        ([range(5) as $i | ($l.top_logprobs[$i] | to_entries | max_by(.value) | .value) == $l.token_logprobs[$i]] | all) and
        ([range(5) as $i | ($l.top_logprobs[$i] | length) <= 3] | all)' "$tmp/body" >/dev/null; then
    ok "completions logprobs: 5 tokens, 3 alternatives each, greedy takes the best"
else
    fail "completions logprobs" "HTTP $status" "$(body)"
fi
post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "logprobs": 1, "echo": true}'
if [[ $status == 200 ]] && jq -e '.choices[0] as $c | ($c.text | startswith("Once upon a time")) and
        ($c.logprobs.tokens | length) == (($c.logprobs.token_logprobs | length)) and
        $c.logprobs.token_logprobs[0] == null and ($c.logprobs.token_logprobs[1:] | all(. <= 0))' \
        "$tmp/body" >/dev/null; then
    ok "echo: the prompt's text first, its tokens' log-probabilities (the first null)"
else
    fail "echo with logprobs" "HTTP $status" "$(body)"
fi
# echo's text_offset: where each token's text begins in the echoed text; <s> adds none, so
# "Once upon a time" (<s> Once upon a time) gives 0 0 4 9 11 and the completion starts at 16
if [[ $status == 200 ]] && jq -e '.choices[0] as $c | $c.logprobs as $l |
        $l.text_offset[0:6] == [0, 0, 4, 9, 11, 16] and
        ([range(5; $l.tokens | length) as $i |
            $c.text[$l.text_offset[$i]:($l.text_offset[$i] + ($l.tokens[$i] | length))] == $l.tokens[$i]] | all)' \
        "$tmp/body" >/dev/null; then
    ok "echo: text_offset 0 at the echoed prompt's start, <s> adds no text, each token at its place"
else
    fail "echo text_offset" "$(jq -c '.choices[0].logprobs | [.tokens, .text_offset]' "$tmp/body")"
fi
post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "logprobs": 1, "echo": true, "stream": true}'
if [[ $status == 200 ]] && [[ $(sed -n 's/^data: {/{/p' "$tmp/body" | jq -sc '[.[].choices[0].logprobs.text_offset // [] | .[]] | .[0:6]') == '[0,0,4,9,11,16]' ]]; then
    ok "echo streamed: the prompt's chunk's text_offset, then the first token's at 16"
else
    fail "echo streamed text_offset" "$(head -c 1500 "$tmp/body")"
fi
post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 2}'
if [[ $status == 200 ]] && jq -e '.choices[0].logprobs.content as $c | ($c | length) == 4 and
        ([$c[].token] | join("")) == .choices[0].message.content and
        all($c[]; (.top_logprobs | length) == 2 and .top_logprobs[0].logprob == .logprob and
            (.bytes | length) == (.token | utf8bytelength))' "$tmp/body" >/dev/null; then
    ok "chat logprobs: content entries with bytes and 2 alternatives"
else
    fail "chat logprobs" "HTTP $status" "$(body)"
fi
still_serves "values out of range"

# --- the context length (--max-model-len 256) ---
ids300=$(seq -s, 1 300)
badc "a prompt over the model length (300 token ids)" 400 '"prompt"' '"context_length_exceeded"' "{\"prompt\": [$ids300]}"
ids200=$(seq -s, 1 200)
post /v1/completions "{\"prompt\": [$ids200], \"max_tokens\": 57}"
# the prompt fits, prompt + max_tokens (257) does not: the error may name either field
if [[ $status == 400 ]] && jq -e '(.error.message | type == "string" and length > 0) and (.error.type | type == "string")
        and (.error.param == "prompt" or .error.param == "max_tokens") and .error.code == "context_length_exceeded"' \
        "$tmp/body" >/dev/null 2>&1; then
    ok "prompt + max_tokens over the model length"
else
    fail "prompt + max_tokens over the model length" "HTTP $status" "$(body)"
fi
good "prompt + max_tokens exactly the model length" /v1/completions "{\"prompt\": [$ids200], \"max_tokens\": 56}"
long=$(printf 'Once upon a time %.0s' $(seq 80))
badch "a chat prompt over the model length" 400 '"messages"' '"context_length_exceeded"' \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}"
# the message gives the prompt's length and what it asks for; no request asks for a negative count
if grep -q 'asks for -' "$tmp/body"; then
    fail "the chat context-length message asks for no negative number of tokens" "$(body)"
else
    ok "the chat context-length message asks for no negative number of tokens"
fi
still_serves "context-length errors"

# --- unknown model, unknown fields ---
badc "an unknown model" 404 '"model"' '"model_not_found"' '{"prompt": "a", "model": "gpt-9"}'
badch "an unknown model (chat)" 404 '"model"' '"model_not_found"' \
    '{"messages": [{"role": "user", "content": "hi"}], "model": "gpt-9"}'
good "the served model's name" /v1/completions '{"prompt": "a", "model": "stories260K", "max_tokens": 2}'
# no field is silently ignored: unknown ones and ones asking for what is not done are 400s naming them
badc "an unknown field" 400 '"frobnicate"' null '{"prompt": "a", "max_tokens": 2, "frobnicate": {"x": [1, 2]}}'
badch "a chat field on completions' twin" 400 '"echo"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "echo": true}'
badch "response_format json_schema with a keyword not taken (pattern)" 400 '"response_format.json_schema.schema"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a"}}}}'
badch "tool_choice required without tools" 400 '"tool_choice"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}'
badch "tool_choice naming a function not in tools" 400 '"tool_choice.function.name"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}'
badch "a tool's parameters with a keyword not taken, when the call is required" 400 '"tools[0].function.parameters"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "date"}}}}}], "tool_choice": "required"}'
badch "two tools of one name" 400 '"tools[1].function.name"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}'
badch "the deprecated functions field" 400 '"functions"' null \
    '{"messages": [{"role": "user", "content": "hi"}], "functions": [{"name": "f"}]}'
badc "best_of above n" 400 '"best_of"' null '{"prompt": "a", "best_of": 4}'
good "fields that ask for what is done anyway" /v1/completions \
    '{"prompt": "a", "max_tokens": 2, "user": "u", "best_of": 1, "suffix": null, "service_tier": "auto"}'

# --- /tokenize and /detokenize ---
post /tokenize '{"prompt": "Once upon a time"}'
if [[ $status == 200 ]] && jq -e '.tokens == [1, 403, 407, 261, 378] and .count == 5' "$tmp/body" >/dev/null 2>&1; then
    ok "/tokenize"
else
    fail "/tokenize" "HTTP $status" "$(body)"
fi
post /detokenize '{"tokens": [403, 407, 261, 378]}'
if [[ $status == 200 ]] && jq -e '.prompt == "Once upon a time"' "$tmp/body" >/dev/null 2>&1; then
    ok "/detokenize"
else
    fail "/detokenize" "HTTP $status" "$(body)"
fi
bad "/tokenize without a prompt" 400 '"prompt"' null /tokenize '{}'
bad "/tokenize with a number prompt" 400 '"prompt"' null /tokenize '{"prompt": 3}'
bad "/tokenize body not JSON" 400 null null /tokenize 'nope'
bad "/detokenize without tokens" 400 '"tokens"' null /detokenize '{}'
bad "/detokenize tokens a string" 400 '"tokens"' null /detokenize '{"tokens": "a"}'
bad "/tokenize with an unknown field" 400 '"frobnicate"' null /tokenize '{"prompt": "a", "frobnicate": 1}'
bad "/detokenize with an unknown field" 400 '"prompt"' null /detokenize '{"tokens": [1], "prompt": "a"}'
bad "/tokenize for another model" 404 '"model"' '"model_not_found"' /tokenize '{"prompt": "a", "model": "gpt-9"}'
for t in 512 -1 1.5; do
    post /detokenize "{\"tokens\": [3, $t]}"
    # the field is tokens[1] (as prompt[1] is for /v1/completions); "tokens" is taken too
    if [[ $status == 400 ]] && jq -e '(.error.message | type == "string" and length > 0) and (.error.type | type == "string")
            and (.error.param == "tokens[1]" or .error.param == "tokens") and .error.code == null' "$tmp/body" >/dev/null 2>&1; then
        ok "/detokenize token $t -> 400"
    else
        fail "/detokenize token $t -> 400" "HTTP $status" "$(body)"
    fi
done
still_serves "bad /tokenize and /detokenize requests"

# --- a 100 KB header ---
req /health -H "X-Big: $(head -c 100000 /dev/zero | tr '\0' a)"
if [[ $status == 431 ]]; then ok "a 100 KB header -> 431"; else fail "a 100 KB header -> 431" "HTTP $status" "$(body)"; fi
# libmicrohttpd answers headers over its connection pool itself, before snug's handler runs,
# so this one answer is its own short HTML page, not OpenAI's error JSON (a known limit)
still_serves "a 100 KB header"

# --- deep nesting: refused at once, not recursed into ---
deep() { head -c 10000 /dev/zero | tr '\0' "$1"; }
{ printf '{"prompt": '; deep '['; deep ']'; printf '}'; } >"$tmp/deep1.json"
{ deep '['; deep ']'; } >"$tmp/deep2.json"
{ printf '{"prompt": "a", "x": '; for ((i = 0; i < 10000; i++)); do printf '{"a":'; done; printf 1; deep '}'; printf '}'; } >"$tmp/deep3.json"
for f in deep1 deep2 deep3; do
    start=$(date +%s%N)
    req /v1/completions -H 'Content-Type: application/json' --data-binary @"$tmp/$f.json"
    ms=$((($(date +%s%N) - start) / 1000000))
    check_error "JSON nested 10,000 deep ($f) -> 400" 400 null null
    if [[ $ms -lt 2000 ]]; then ok "JSON nested 10,000 deep ($f) answered in under 2 s (${ms} ms)"; else fail "JSON nested 10,000 deep ($f) answered in under 2 s" "${ms} ms"; fi
done
still_serves "deep nesting"

# --- a 100 MB body -> 413, and the server stays healthy ---
# (a JSON opening and then NUL bytes: the server must refuse it by its size, before parsing)
printf '{"prompt": "' >"$tmp/big.json"
truncate -s 100000000 "$tmp/big.json"
req /v1/completions -H 'Content-Type: application/json' --data-binary @"$tmp/big.json"
check_error "a 100 MB body -> 413" 413 null '"body_too_large"'
req /v1/completions -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/big.json"
check_error "a 100 MB chunked body -> 413" 413 null '"body_too_large"'
# without "Expect: 100-continue" the client sends the whole body at once: the server must still
# get its 413 to the client (read or linger on the rest of the body before closing, rather than
# resetting the connection under the answer), every time
got=""
for ((i = 0; i < 20; i++)); do
    req /v1/completions -H 'Content-Type: application/json' -H 'Expect:' --data-binary @"$tmp/big.json"
    got+="$status "
done
if [[ $got == "$(printf '413 %.0s' $(seq 20))" ]]; then
    ok "a 100 MB body sent without Expect: 100-continue -> 413, 20 times out of 20"
else
    fail "a 100 MB body sent without Expect: 100-continue -> 413, 20 times out of 20" "statuses: $got"
fi
rm -f "$tmp/big.json"
req /health
if [[ $status == 200 ]]; then ok "/health 200 after the 100 MB bodies"; else fail "/health 200 after the 100 MB bodies" "HTTP $status"; fi
still_serves "the 100 MB bodies"

# --- content types ---
post /v1/completions '{"prompt": "a", "max_tokens": 2}'
if [[ $ctype == application/json* ]]; then ok "Content-Type application/json for a completion"; else fail "Content-Type application/json for a completion" "got '$ctype'"; fi

# --- raw server-sent events ---
# sse_parse FILE: splits FILE (a raw SSE body) into $tmp/events.jsonl, one JSON event a line;
# sets $sse_err when the bytes are not exactly a run of "data: X\n\n" events of which the last,
# and only the last, is "data: [DONE]" and every other X one line of JSON (one jq reads it all).
sse_parse() {
    sse_err=""
    if ! jq -Rsrc '
        split("\n\n")
        | if length < 2 or .[-1] != "" then error("the body does not end in an event and a blank line: " + (.[-1] | tostring)[-200:]) else .[:-1] end
        | if .[-1] != "data: [DONE]" then error("the last event is not data: [DONE]: " + .[-1][:200]) else .[:-1] end
        | to_entries[]
        | .key as $k | .value
        | if (startswith("data: {") | not) or contains("\n") then error("event \($k) is not one data: {json} line: " + .[:200]) else . end
        | .[6:] | (try fromjson catch error("event \($k) is not JSON: " + .[:200])) | tojson' \
        "$1" >"$tmp/events.jsonl" 2>"$tmp/sse.err"; then
        sse_err=$(head -c 600 "$tmp/sse.err")
        [[ -n $sse_err ]] || sse_err="jq could not read the body"
    fi
}
# stream PATH JSON: a streaming request; raw body in $tmp/sse, headers in $tmp/sse.h.
stream() {
    curl -sN --max-time 20 -D "$tmp/sse.h" -o "$tmp/sse" -H 'Content-Type: application/json' \
        --data-binary "$2" "$url$1"
    sse_ctype=$(grep -i '^content-type:' "$tmp/sse.h" | tr -d '\r' | sed 's/^[^:]*: *//')
}

req_c='"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0'
post /v1/completions "{$req_c}"
plain_text=$(jq -j '.choices[0].text' "$tmp/body")
plain_usage=$(jq -c '.usage' "$tmp/body")
stream /v1/completions "{$req_c, \"stream\": true}"
sse_parse "$tmp/sse"
if [[ -z $sse_err ]]; then ok "completion stream: data: {json} events, the last data: [DONE]"; else fail "completion stream: data: {json} events, the last data: [DONE]" "$sse_err"; fi
if [[ $sse_ctype == text/event-stream* ]]; then ok "completion stream Content-Type text/event-stream"; else fail "completion stream Content-Type text/event-stream" "got '$sse_ctype'"; fi
if jq -se 'length > 1 and all(.object == "text_completion" and (.choices | length == 1) and (.choices[0].text | type == "string"))' \
    "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "completion stream events: object text_completion, one choice with text"
else
    fail "completion stream events: object text_completion, one choice with text" "$(head -c 600 "$tmp/events.jsonl")"
fi
if jq -se '(map(.choices[0].finish_reason) | (.[:-1] | all(. == null)) and (.[-1] | type == "string"))' \
    "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "completion stream: only the last event has a finish_reason"
else
    fail "completion stream: only the last event has a finish_reason" "$(jq -c '.choices[0].finish_reason' "$tmp/events.jsonl" | tr '\n' ' ')"
fi
streamed=$(jq -j '.choices[0].text' "$tmp/events.jsonl")
if [[ $streamed == "$plain_text" && -n $plain_text ]]; then
    ok "completion stream texts concatenate to the non-streaming greedy text"
else
    fail "completion stream texts concatenate to the non-streaming greedy text" "streamed: $streamed" "plain:    $plain_text"
fi

stream /v1/completions "{$req_c, \"stream\": true, \"stream_options\": {\"include_usage\": true}}"
sse_parse "$tmp/sse"
if [[ -z $sse_err ]]; then ok "include_usage stream well formed"; else fail "include_usage stream well formed" "$sse_err"; fi
if jq -se --argjson pu "$plain_usage" '.[-1] as $u | ($u.choices == [] and ($u.usage | .prompt_tokens + .completion_tokens == .total_tokens)
        and $u.usage == $pu and $u.usage.completion_tokens == length - 1
        and (.[:-1] | all(.usage == null and (.choices | length == 1))))' "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "include_usage: the second-to-last event has choices [] and consistent usage"
else
    fail "include_usage: the second-to-last event has choices [] and consistent usage" "non-streaming usage $plain_usage" \
        "$(tail -n 2 "$tmp/events.jsonl")"
fi
streamed=$(jq -j '.choices[]?.text' "$tmp/events.jsonl")
if [[ $streamed == "$plain_text" ]]; then ok "include_usage stream text = non-streaming text"; else fail "include_usage stream text = non-streaming text" "$streamed"; fi

req_ch='"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 16, "temperature": 0'
post /v1/chat/completions "{$req_ch}"
plain_chat=$(jq -j '.choices[0].message.content' "$tmp/body")
stream /v1/chat/completions "{$req_ch, \"stream\": true, \"stream_options\": {\"include_usage\": true}}"
sse_parse "$tmp/sse"
if [[ -z $sse_err ]]; then ok "chat stream well formed"; else fail "chat stream well formed" "$sse_err"; fi
if [[ $sse_ctype == text/event-stream* ]]; then ok "chat stream Content-Type text/event-stream"; else fail "chat stream Content-Type text/event-stream" "got '$sse_ctype'"; fi
if jq -se 'all(.object == "chat.completion.chunk")' "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "chat stream objects are chat.completion.chunk"
else
    fail "chat stream objects are chat.completion.chunk" "$(jq -c .object "$tmp/events.jsonl" | sort | uniq -c)"
fi
if jq -se '.[0].choices[0].delta.role == "assistant"' "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "chat stream: the first delta has role assistant"
else
    fail "chat stream: the first delta has role assistant" "$(head -n 1 "$tmp/events.jsonl")"
fi
if jq -se 'map(select(.choices | length > 0)) | (.[-1].choices[0].finish_reason | type == "string")
        and (.[:-1] | all(.choices[0].finish_reason == null))' "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "chat stream: the last content chunk (only) has a finish_reason"
else
    fail "chat stream: the last content chunk (only) has a finish_reason" "$(tail -n 2 "$tmp/events.jsonl")"
fi
if jq -se '.[-1].choices == [] and (.[-1].usage | .prompt_tokens + .completion_tokens == .total_tokens)' \
    "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "chat stream usage chunk"
else
    fail "chat stream usage chunk" "$(tail -n 1 "$tmp/events.jsonl")"
fi
streamed=$(jq -j '.choices[]?.delta.content // empty' "$tmp/events.jsonl")
if [[ $streamed == "$plain_chat" && -n $plain_chat ]]; then
    ok "chat stream deltas concatenate to the non-streaming greedy content"
else
    fail "chat stream deltas concatenate to the non-streaming greedy content" "streamed: $streamed" "plain:    $plain_chat"
fi
stream /v1/completions '{"prompt": "Once upon a time", "max_tokens": 6, "n": 2, "temperature": 1, "seed": 3, "stream": true}'
sse_parse "$tmp/sse"
if [[ -z $sse_err ]] && jq -se 'map(.choices[0]) | (map(.index) | unique == [0, 1])
        and (map(select(.finish_reason != null) | .index) | sort == [0, 1])' "$tmp/events.jsonl" >/dev/null 2>&1; then
    ok "n 2 stream: choices 0 and 1, each finished once"
else
    fail "n 2 stream: choices 0 and 1, each finished once" "$sse_err" "$(jq -c '.choices' "$tmp/events.jsonl" | head -4)"
fi

# a stream with a stop string: the same text as without streaming, ended by the stop
stop_req='"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0, "stop": ["Lily", " l"]'
post /v1/completions "{$stop_req}"
plain_text=$(jq -j '.choices[0].text' "$tmp/body")
plain_finish=$(jq -r '.choices[0].finish_reason' "$tmp/body")
stream /v1/completions "{$stop_req, \"stream\": true}"
sse_parse "$tmp/sse"
streamed=$(jq -j '.choices[0].text' "$tmp/events.jsonl")
last_finish=$(tail -n 1 "$tmp/events.jsonl" | jq -r '.choices[0].finish_reason')
if [[ -z $sse_err && $plain_finish == stop && $last_finish == stop && $streamed == "$plain_text" && $streamed != *Lily* && $streamed != *" l"* ]]; then
    ok "a stream with stop strings: the non-streaming text, finish_reason stop"
else
    fail "a stream with stop strings: the non-streaming text, finish_reason stop" "$sse_err" \
        "streamed ($last_finish): $streamed" "plain ($plain_finish):    $plain_text"
fi
# a stream request that fails its checks is answered as a JSON error, not as events
post /v1/completions '{"prompt": "a", "max_tokens": 0, "stream": true}'
check_error "a bad stream request -> a JSON 400" 400 '"max_tokens"' null
post /v1/chat/completions '{"messages": [], "stream": true}'
check_error "a bad chat stream request -> a JSON 400" 400 '"messages"' null

# --- greedy over HTTP = snug generate ---
# generate prints the whole sequence (prompt and new tokens) decoded in one go, then a newline;
# --ids prints every id (BOS, prompt, new). The server answers text, so the exact comparison is
# of bytes: the prompt followed by the completion's text must be generate's text byte for byte
# (re-tokenizing the text would not be exact: greedy ids need not be the canonical tokenization
# of their text). The ids are compared too: the completion from the prompt given as generate's
# prompt ids must give the same text, and /detokenize of generate's ids after BOS must be the
# same prompt + text. Two prompts: one whose first new token starts with a space (" upon"), one
# whose does not (",").
for prompt in "Once upon a time" "Once"; do
    "$snug" generate -p "$prompt" -n 20 --temperature 0 --threads $threads >"$tmp/gen.txt" 2>"$tmp/gen.err"
    ids=$("$snug" generate -p "$prompt" -n 20 --temperature 0 --threads $threads --ids 2>>"$tmp/gen.err")
    post /v1/completions "$(jq -nc --arg p "$prompt" '{prompt: $p, max_tokens: 20, temperature: 0, ignore_eos: true}')"
    text=$(jq -j '.choices[0].text' "$tmp/body")
    printf '%s%s\n' "$prompt" "$text" >"$tmp/http.txt"
    if cmp -s "$tmp/gen.txt" "$tmp/http.txt"; then
        ok "greedy over HTTP = snug generate ('$prompt')"
    else
        fail "greedy over HTTP = snug generate ('$prompt')" "generate: $(head -c 300 "$tmp/gen.txt")" \
            "HTTP:     $(head -c 300 "$tmp/http.txt")" "$(head -c 300 "$tmp/gen.err")"
    fi
    read -r -a idv <<<"$ids"
    n_prompt=$(post /tokenize "$(jq -nc --arg p "$prompt" '{prompt: $p}')"; jq '.count' "$tmp/body")
    prompt_ids=$(IFS=,; echo "${idv[*]:0:n_prompt}")
    after_bos=$(IFS=,; echo "${idv[*]:1}")
    post /v1/completions "{\"prompt\": [$prompt_ids], \"max_tokens\": 20, \"temperature\": 0, \"ignore_eos\": true}"
    id_text=$(jq -j '.choices[0].text' "$tmp/body")
    post /detokenize "{\"tokens\": [$after_bos]}"
    detok=$(jq -j '.prompt' "$tmp/body")
    if [[ ${#idv[@]} -eq $((n_prompt + 20)) && $id_text == "$text" && $detok == "$(cat "$tmp/gen.txt")" ]]; then
        ok "greedy from generate's prompt ids = the text prompt's; /detokenize of generate's ids = generate's text ('$prompt')"
    else
        fail "greedy from generate's prompt ids = the text prompt's; /detokenize of generate's ids = generate's text ('$prompt')" \
            "ids: ${#idv[@]} (prompt $n_prompt + 20)" "from ids: $id_text" "text:     $text" "detokenize: $detok"
    fi
    # the ids themselves: vLLM's return_tokens_as_token_ids names each token "token_id:N"
    post /v1/completions "$(jq -nc --arg p "$prompt" '{prompt: $p, max_tokens: 20, temperature: 0,
        ignore_eos: true, logprobs: 0, echo: true, return_tokens_as_token_ids: true}')"
    http_ids=$(jq -r '[.choices[0].logprobs.tokens[] | ltrimstr("token_id:")] | join(" ")' "$tmp/body")
    if [[ $http_ids == "$ids" ]]; then
        ok "greedy ids over HTTP (echo, return_tokens_as_token_ids) = snug generate --ids ('$prompt')"
    else
        fail "greedy ids over HTTP = snug generate --ids ('$prompt')" "generate: $ids" "HTTP:     $http_ids"
    fi
done

# --- n > 1, seeds ---
nreq='"prompt": "Once upon a time", "max_tokens": 30, "temperature": 1, "n": 3, "seed": 7, "ignore_eos": true'
post /v1/completions "{$nreq}"
cp "$tmp/body" "$tmp/n1.json"
if [[ $status == 200 ]] && jq -e '(.choices | length == 3) and (.choices | map(.index) == [0, 1, 2])
        and (.choices | all((.text | type == "string") and (.finish_reason | type == "string")))
        and .usage.completion_tokens == (.choices | length) * 30' "$tmp/n1.json" >/dev/null 2>&1; then
    ok "n 3: three choices, indexes 0..2"
else
    fail "n 3: three choices, indexes 0..2" "HTTP $status" "$(head -c 600 "$tmp/n1.json")"
fi
post /v1/completions "{$nreq}"
if [[ $(jq -c '.choices' "$tmp/body") == "$(jq -c '.choices' "$tmp/n1.json")" ]]; then
    ok "n 3 with a seed: the same choices twice"
else
    fail "n 3 with a seed: the same choices twice" "$(jq -c '[.choices[].text]' "$tmp/n1.json")" "$(jq -c '[.choices[].text]' "$tmp/body")"
fi
seeded() { post /v1/completions "{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 1, \"seed\": $1}"; jq -j '.choices[0].text' "$tmp/body"; }
a=$(seeded 1); b=$(seeded 1); c=$(seeded 2)
if [[ -n $a && $a == "$b" ]]; then ok "the same seed gives the same text"; else fail "the same seed gives the same text" "$a" "$b"; fi
if [[ -n $a && $a != "$c" ]]; then ok "another seed gives another text"; else fail "another seed gives another text" "$a" "$c"; fi

# concurrent requests are batched together: each must still give what it gives alone
greedy='{"prompt": "Once upon a time", "max_tokens": 100, "temperature": 0, "ignore_eos": true}'
post /v1/completions "$greedy"
alone=$(jq -j '.choices[0].text' "$tmp/body")
cpids=()
for i in 1 2 3 4 5 6 7 8; do
    curl -s --max-time 30 -o "$tmp/par$i" -H 'Content-Type: application/json' --data-binary "$greedy" "$url/v1/completions" &
    cpids+=($!)
done
# and other prompts beside them
for i in 1 2 3 4; do
    curl -s --max-time 30 -o /dev/null -H 'Content-Type: application/json' \
        --data-binary "{\"prompt\": \"Tim and $i\", \"max_tokens\": 60, \"temperature\": 1, \"n\": 4}" "$url/v1/completions" &
    cpids+=($!)
done
wait "${cpids[@]}"
same=0
for i in 1 2 3 4 5 6 7 8; do [[ $(jq -j '.choices[0].text' "$tmp/par$i" 2>/dev/null) == "$alone" ]] && same=$((same + 1)); done
if [[ -n $alone && $same -eq 8 ]]; then
    ok "8 concurrent greedy completions = the one alone"
else
    fail "8 concurrent greedy completions = the one alone" "$same of 8 the same" "alone: ${alone:0:200}" \
        "$(for i in 1 2 3 4 5 6 7 8; do jq -c '.choices[0].text // .' "$tmp/par$i" 2>&1 | head -c 200; echo; done)"
fi
cpids=()
for i in 1 2 3 4; do
    curl -s --max-time 30 -o "$tmp/par$i" -H 'Content-Type: application/json' --data-binary "{$nreq}" "$url/v1/completions" &
    cpids+=($!)
done
wait "${cpids[@]}"
same=0
for i in 1 2 3 4; do [[ $(jq -c '.choices' "$tmp/par$i" 2>/dev/null) == "$(jq -c '.choices' "$tmp/n1.json")" ]] && same=$((same + 1)); done
if [[ $same -eq 4 ]]; then ok "4 concurrent seeded n 3 requests = the one alone"; else fail "4 concurrent seeded n 3 requests = the one alone" "$same of 4 the same"; fi

# --- a stream the client aborts ---
# the client reads the first 3000 bytes of a stream of n 16 x 250 tokens and goes (head closes the
# pipe, curl dies of it): the engine must drop the request's sequences (no requests running, no
# KV blocks held) within 5 s, and stop generating for it. The same with curl --max-time 0.3.
abort_check() { # NAME CURL_RC: after the client has gone
    local name=$1 rc=$2 running="" used="" i generated
    for ((i = 0; i < 50; i++)); do
        running=$(metric snug_num_requests_running)
        used=$(metric snug_kv_blocks_used)
        [[ $running == 0 && $used == 0 ]] && break
        sleep 0.1
    done
    if [[ $running == 0 && $used == 0 ]]; then
        ok "$name: snug_num_requests_running 0 and snug_kv_blocks_used 0 within 5 s ($((i / 10)).$((i % 10)) s)"
    else
        fail "$name: snug_num_requests_running 0 and snug_kv_blocks_used 0 within 5 s" \
            "snug_num_requests_running $running, snug_kv_blocks_used $used"
    fi
    generated=$(metric snug_generation_tokens_total)
    generated=$((${generated:-0} - ${gen0:-0}))
    if grep -q '^data: \[DONE\]' "$tmp/aborted"; then
        ok "$name stops its generation (# skipped: the stream finished before the client left)"
    elif [[ $generated -lt 4000 ]]; then
        ok "$name stops its generation ($generated of 4000 tokens generated; curl exit $rc)"
    elif [[ $name == *"0.3 s"* ]]; then
        # a fast machine generates all 4000 within 0.3 s (the client reads nothing, so the
        # sequences pause only once their rings are full): nothing to tell from the count
        ok "$name stops its generation (# skipped: all 4000 were generated before it left)"
    else
        fail "$name stops its generation" "$generated tokens generated after the client left (of 4000)"
    fi
}
long_stream='{"prompt": "Once upon a time", "max_tokens": 250, "n": 16, "temperature": 1, "ignore_eos": true, "stream": true}'
gen0=$(metric snug_generation_tokens_total)
curl -sN --max-time 20 -H 'Content-Type: application/json' --data-binary "$long_stream" "$url/v1/completions" |
    head -c 3000 >"$tmp/aborted"
abort_check "a stream the client leaves after 3000 bytes" "${PIPESTATUS[0]}"
gen0=$(metric snug_generation_tokens_total)
curl -sN --max-time 0.3 -o "$tmp/aborted" -H 'Content-Type: application/json' --data-binary "$long_stream" "$url/v1/completions"
abort_check "a stream the client leaves after 0.3 s" $?
still_serves "an aborted stream"

# --- /metrics: the latency histograms count every choice's tokens, buckets cumulative ---
curl -s --max-time 5 "$url/metrics" >"$tmp/metrics"
if awk '/^snug_time_to_first_token_seconds_count / { t = $2 } /^snug_inter_token_latency_seconds_count / { i = $2 }
        /^snug_inter_token_latency_seconds_bucket/ { if ($2 < last) bad = 1; last = $2 }
        /^snug_inter_token_latency_seconds_bucket\{le="\+Inf"\}/ { inf = $2 }
        END { exit !(t > 0 && i > t && inf == i && !bad) }' "$tmp/metrics"; then
    ok "/metrics: time-to-first-token and inter-token histograms, cumulative, +Inf = count"
else
    fail "/metrics latency histograms" "$(grep -E 'first_token|inter_token' "$tmp/metrics" | head -8)"
fi

# --- prefix caching: a second turn finds the first's prompt and answer in whole blocks ---
# ids_of: the generated ids of the last answer (return_tokens_as_token_ids), space-separated
ids_of() { jq -r '[.choices[0].logprobs.tokens[] | ltrimstr("token_id:")] | join(",")' "$tmp/body"; }
cached_of() { jq -r '.usage.prompt_tokens_details.cached_tokens' "$tmp/body"; }
turn1=$(seq -s, 300 339)   # 40 prompt ids
turn_body() { echo "{\"prompt\": [$1], \"max_tokens\": 20, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 0, \"return_tokens_as_token_ids\": true $2}"; }
prefix_turns() { # NAME: two turns on $url; sets $gen1, $gen2 and $cached1, $cached2
    post /v1/completions "$(turn_body "$turn1" "")"
    gen1=$(ids_of) cached1=$(cached_of)
    post /v1/completions "$(turn_body "$turn1,$gen1,$(seq -s, 400 409)" "")"
    gen2=$(ids_of) cached2=$(cached_of)
}
prefix_turns
# 40 + 20 tokens, 59 of them computed: 3 whole blocks of 16
if [[ $cached1 == 0 && $cached2 == 48 && -n $gen2 ]]; then
    ok "cached_tokens: 0 on the first turn, the 48 whole-block tokens of prompt + answer on the second"
else
    fail "cached_tokens of two turns" "first $cached1, second $cached2 (want 0 and 48)" "$(body)"
fi
stream_usage=$(curl -sN --max-time 20 -H 'Content-Type: application/json' --data-binary \
    "{\"prompt\": [$turn1], \"max_tokens\": 3, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
    "$url/v1/completions" | grep '"usage"' | sed 's/^data: //' | jq -r '.usage.prompt_tokens_details.cached_tokens')
if [[ $stream_usage == 32 ]]; then
    ok "the streamed usage chunk has cached_tokens (32: the 40-token prompt's whole blocks but its last)"
else
    fail "cached_tokens in the streamed usage chunk" "got '$stream_usage', want 32"
fi
post /v1/completions "$(turn_body "$turn1" ', "cache_salt": "tenant-a"')"
salt1=$(cached_of)
post /v1/completions "$(turn_body "$turn1" ', "cache_salt": "tenant-a"')"
salt2=$(cached_of)
post /v1/completions "$(turn_body "$turn1" ', "cache_salt": "tenant-b"')"
salt3=$(cached_of)
if [[ $salt1 == 0 && $salt2 == 32 && $salt3 == 0 ]]; then
    ok "cache_salt: another salt finds nothing (0), the same salt its own blocks (32), a third nothing"
else
    fail "cache_salt isolation" "tenant-a $salt1 then $salt2, tenant-b $salt3 (want 0, 32, 0)"
fi
badc "cache_salt a number -> 400" 400 '"cache_salt"' null '{"prompt": "x", "cache_salt": 5}'
badc "cache_salt empty -> 400" 400 '"cache_salt"' null '{"prompt": "x", "cache_salt": ""}'
hits=$(metric snug_prefix_cache_hits_total) queries=$(metric snug_prefix_cache_queries_total)
cached_blocks=$(metric snug_kv_blocks_cached) evictable=$(metric snug_kv_blocks_evictable)
if [[ $(metric snug_prefix_caching) == 1 && $hits -ge 112 && $queries -gt $hits && $cached_blocks -gt 0 &&
      $evictable == "$cached_blocks" && -n $(metric snug_kv_block_evictions_total) ]]; then
    ok "/metrics: prefix cache queries $queries, hits $hits, $cached_blocks blocks cached, all evictable"
else
    fail "/metrics prefix cache" "$(curl -s "$url/metrics" | grep -E 'prefix|cached|evict' | grep -v '^#')"
fi
req /reset_prefix_cache -X POST
dropped=$(jq -r '.dropped_blocks' "$tmp/body" 2>/dev/null)
post /v1/completions "$(turn_body "$turn1" "")"
if [[ $status == 200 && $dropped == "$cached_blocks" && $(cached_of) == 0 && $(metric snug_kv_blocks_cached) -gt 0 ]]; then
    ok "POST /reset_prefix_cache dropped $dropped blocks; the next request found nothing"
else
    fail "POST /reset_prefix_cache" "dropped '$dropped' of $cached_blocks, then cached $(cached_of)" "$(body)"
fi
req /reset_prefix_cache
check_error "GET /reset_prefix_cache -> 405" 405 null '"method_not_allowed"'
main_gen2=$gen2

# --- the API key ---
main_pid=$pid main_url=$url
start_server api-key --api-key sekrit --max-num-seqs 16 --max-body-bytes 4096 \
    --chat-template tests/data/chat/tool-arguments-mapping.jinja --timeline
comp='{"prompt": "Once upon a time", "max_tokens": 4}'
bad "no API key -> 401" 401 null '"invalid_api_key"' /v1/completions "$comp"
bad "a wrong API key -> 401" 401 null '"invalid_api_key"' /v1/completions "$comp" -H 'Authorization: Bearer nope'
bad "the key's prefix -> 401" 401 null '"invalid_api_key"' /v1/completions "$comp" -H 'Authorization: Bearer sekri'
bad "the key without Bearer -> 401" 401 null '"invalid_api_key"' /v1/completions "$comp" -H 'Authorization: sekrit'
bad "no API key on chat -> 401" 401 null '"invalid_api_key"' /v1/chat/completions \
    '{"messages": [{"role": "user", "content": "hi"}]}'
req /v1/models
check_error "no API key on GET /v1/models -> 401" 401 null '"invalid_api_key"'
req /v1/memory
check_error "no API key on GET /v1/memory -> 401" 401 null '"invalid_api_key"'
req /
if [[ $status == 200 && $ctype == text/html* ]]; then ok "GET / needs no API key (the page asks for it)"
else fail "GET / needs no API key" "HTTP $status" "$(head -c 200 "$tmp/body")"; fi
req /timeline.svg
check_error "no API key on GET /timeline.svg -> 401" 401 null '"invalid_api_key"'
req /timeline.svg -H 'Authorization: Bearer sekrit'
if [[ $status == 200 && $ctype == image/svg+xml ]] && grep -q '<svg' "$tmp/body" && grep -q 'memory over the start-up' "$tmp/body" &&
    curl -s --max-time 5 -H 'Authorization: Bearer sekrit' "$url/v1/memory" | jq -e '.timeline == true' >/dev/null; then
    ok "--timeline: GET /timeline.svg draws the start-up ($(wc -c <"$tmp/body") bytes), /v1/memory says so"
else
    fail "--timeline: GET /timeline.svg" "HTTP $status, Content-Type '$ctype'" "$(head -c 300 "$tmp/body")"
fi
still_serves "the right API key" -H 'Authorization: Bearer sekrit'
req /health
if [[ $status == 200 ]]; then ok "/health needs no API key"; else fail "/health needs no API key" "HTTP $status" "$(body)"; fi
head -c 5000 /dev/zero | tr '\0' ' ' >"$tmp/5k"
req /v1/completions -H 'Authorization: Bearer sekrit' -H 'Content-Type: application/json' --data-binary @"$tmp/5k"
check_error "a body over --max-body-bytes 4096 -> 413" 413 null '"body_too_large"'
still_serves "a body over --max-body-bytes" -H 'Authorization: Bearer sekrit'
req /reset_prefix_cache -X POST
check_error "POST /reset_prefix_cache without the API key -> 401" 401 null '"invalid_api_key"'
req /reset_prefix_cache -X POST -H 'Authorization: Bearer sekrit'
if [[ $status == 200 ]]; then ok "POST /reset_prefix_cache with the API key"; else fail "POST /reset_prefix_cache with the API key" "HTTP $status" "$(body)"; fi
# --- a chat template that fails (this server's takes a tool call's arguments as a mapping, and
# raises for a role it does not know): a 400 naming the message, never the interpreter's
# error; the template's own text when it raises ---
key=(-H 'Authorization: Bearer sekrit')
# template_error NAME PARAM MESSAGE: the last answer was a 400 for PARAM with exactly MESSAGE and
# nothing of the interpreter's (its Python-style errors, the template's name and places)
template_error() {
    if [[ $status == 400 ]] && jq -e --argjson p "$2" --arg m "$3" '.error.param == $p and .error.message == $m
            and .error.type == "invalid_request_error"' "$tmp/body" >/dev/null 2>&1 &&
        ! grep -qE "mapping|operand|NoneType|chat_template|[0-9]+:[0-9]+" "$tmp/body"; then
        ok "$1"
    else
        fail "$1" "HTTP $status, want 400 for $2: $3" "$(body)"
    fi
}
plain_args_turn='{"messages": [{"role": "user", "content": "What is 6*7?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "calc", "arguments": "6*7"}}]},
    {"role": "tool", "tool_call_id": "x", "content": "42"}, {"role": "user", "content": "thanks"}], "max_tokens": 2}'
post /v1/chat/completions "$plain_args_turn" "${key[@]}"
template_error "a failed template (arguments that are no JSON object) -> 400 naming the message, without the interpreter's error" \
    '"messages[1]"' 'the chat template failed to render messages[1] (role "assistant")'
post /v1/chat/completions "$tool_turn" "${key[@]}"
if [[ $status == 200 ]]; then ok "a template that walks a tool call's arguments gets them as a mapping (the JSON string parsed)"
else fail "a template that walks a tool call's arguments gets them as a mapping" "HTTP 200" "$(body)"; fi
post /v1/chat/completions '{"messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]}' "${key[@]}"
template_error "raise_exception in the template -> 400 with its text" \
    '"messages[0]"' 'the chat template refused messages[0] (role "developer"): Unknown role: developer'
post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}' "${key[@]}"
if [[ $status == 200 ]]; then ok "the same template renders a chat without tool calls"; else fail "the same template renders a chat without tool calls" "HTTP $status" "$(body)"; fi
stop_server api-key INT

# --- --no-prefix-caching: the same ids, nothing found, no reset ---
start_server no-cache --no-prefix-caching --no-access-log --allowed-origins 'http://page.example, http://b.example' --populate-before-ready
if [[ $(phases_of no-cache) == "load reset profile plan populate ready " ]] &&
    grep -q 'kv cache populated in' "$tmp/no-cache.out"; then
    ok "--populate-before-ready: the KV cache resident before ready"
else
    fail "--populate-before-ready" "phases '$(phases_of no-cache)'"
fi
# hdr NAME CURL_ARGS...: the value of response header NAME (case aside) of a request to $url
hdr() { local n=$1; shift; curl -si --max-time 5 "$@" | tr -d '\r' | awk -v n="$(tr 'A-Z' 'a-z' <<<"$n")" -F': ' 'tolower($1) == n { print $2 }'; }
acao=$(hdr Access-Control-Allow-Origin -H 'Origin: http://page.example' "$url/health")
acao_b=$(hdr Access-Control-Allow-Origin -H 'Origin: http://b.example' "$url/v1/models")
acao_evil=$(hdr Access-Control-Allow-Origin -H 'Origin: http://evil.example' "$url/health")
pre=$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://page.example' \
    -H 'Access-Control-Request-Method: POST' "$url/v1/chat/completions")
pre_methods=$(hdr Access-Control-Allow-Methods -X OPTIONS -H 'Origin: http://page.example' "$url/v1/chat/completions")
if [[ $acao == http://page.example && $acao_b == http://b.example && -z $acao_evil && $pre == 204 &&
      $pre_methods == *POST* ]]; then
    ok "--allowed-origins: CORS headers for the listed origins only, and a 204 preflight ($pre_methods)"
else
    fail "--allowed-origins" "page '$acao', b '$acao_b', evil '$acao_evil', preflight $pre '$pre_methods'"
fi
post /v1/completions '{"prompt": "Once", "max_tokens": 1}'
first_id=$(jq -r '.id' "$tmp/body")
if [[ $first_id =~ ^cmpl-[0-9a-f]{16}$ && $first_id_main =~ ^cmpl-[0-9a-f]{16}$ && $first_id != "$first_id_main" ]]; then
    ok "response ids differ across servers: $first_id_main, then $first_id"
else
    fail "response ids differ across servers" "'$first_id_main' and '$first_id'"
fi
prefix_turns
if [[ $cached1 == 0 && $cached2 == 0 && $gen2 == "$main_gen2" && $(metric snug_prefix_caching) == 0 ]]; then
    ok "--no-prefix-caching: cached_tokens 0, the second turn's greedy ids equal the caching server's"
else
    fail "--no-prefix-caching" "cached $cached1 $cached2; ids '$gen2' against '$main_gen2'"
fi
req /reset_prefix_cache -X POST
check_error "POST /reset_prefix_cache with caching off -> 400" 400 null '"prefix_caching_disabled"'
# (this server has no --chat-template: the bundled model's own plain one renders the chat)
n_chat=$("$snug" tokenize models/stories260K --special --no-bos $'<s>User: Hi\nAssistant:' | wc -w)
post /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0}'
if [[ $status == 200 ]] && jq -e --argjson n "$n_chat" '(.choices[0].message.content | type == "string") and .usage.prompt_tokens == $n' "$tmp/body" >/dev/null 2>&1; then
    ok "a chat completion through the bundled model's own template"
else
    fail "a chat completion through the bundled model's own template" "HTTP $status" "$(body)"
fi
if grep -q 'prefix caching off' "$tmp/no-cache.out" && grep -q 'prefix caching on' "$tmp/main.out"; then
    ok "the plan's report says whether prefix caching is on"
else
    fail "the report names prefix caching" "$(grep 'kv cache:' "$tmp/no-cache.out" "$tmp/main.out")"
fi
stop_server no-cache TERM
if grep -q ' 127\.0\.0\.1 ' "$tmp/no-cache.out"; then
    fail "--no-access-log writes no access log" "$(grep ' 127\.0\.0\.1 ' "$tmp/no-cache.out" | head -3)"
else
    ok "--no-access-log writes no access log"
fi

# --- connection limits and timeouts: two stalled uploads (heads in, 20 KB of 100 KB bodies:
# more than the gate keeps, so they go to libmicrohttpd as they come) under --max-uploads 1:
# the first takes the upload pool, the second is told 503 too_many_uploads at once; uploads
# do not count against --max-connections 2 (issue 32: slow uploads no longer lock out
# completions), so a completion is answered at once beside them, and /health 200; after
# --timeout-seconds 2 the stalled body gets 408 ---
start_server timeouts --max-connections 2 --max-uploads 1 --timeout-seconds 2
port=${url##*:}
upload_head() {
    printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"prompt": "'
    head -c 20000 /dev/zero | tr '\0' 'a'
}
exec 5<>"/dev/tcp/127.0.0.1/$port"
upload_head >&5 # then silence
sleep 0.3
exec 6<>"/dev/tcp/127.0.0.1/$port"
upload_head >&6
second=$(timeout 3 cat <&6 | tr -d '\r')
code=$(curl -s -o "$tmp/body" -w '%{http_code} %{time_total}' --max-time 5 -d '{"prompt": "Once", "max_tokens": 2}' "$url/v1/completions")
health=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 "$url/health")
if [[ $(head -1 <<<"$second") == "HTTP/1.1 503 Service Unavailable" && $second == *'"code":"too_many_uploads"'* &&
    ${code%% *} == 200 && ${health%% *} == 200 ]]; then
    ok "a second upload over --max-uploads 1 is told 503 too_many_uploads; a completion beside the first is answered (${code#* } s), /health 200 (${health#* } s)"
else
    fail "an upload over --max-uploads is told 503; a completion beside it is answered" "HTTP $code, /health $health" \
        "the second upload got: $(head -c 300 <<<"$second")" "$(body)"
fi
stalled=$(timeout 3 cat <&5 | tr -d '\r' | head -1)
exec 5>&- 6>&-
if [[ $stalled == "HTTP/1.1 408 Request Timeout" ]]; then
    ok "a stalled upload gets 408 after --timeout-seconds"
else
    fail "a stalled upload gets 408 after --timeout-seconds" "it got '$stalled'"
fi
stop_server timeouts TERM

# --- embeddings: a sentence-transformers directory (tests/data/embedding-mean: mean pooling and
# Normalize in its modules.json) serves them without --embeddings; --pooling last and
# --no-normalize choose over it; a model that is not one, served without --embeddings, says so ---
pid=$main_pid url=$main_url
bad "embeddings without --embeddings: 400 embeddings_disabled" 400 null '"embeddings_disabled"' /v1/embeddings \
    '{"input": "Once upon a time"}'
embed_two='{"input": ["Once upon a time", "Once upon a time", "The end."], "encoding_format": "float"}'
# lengths: each vector's L2 norm; same: the first two equal, the third different
embed_facts='[.data[].embedding | map(. * .) | add | sqrt] as $n | {n: $n, dims: (.data[0].embedding | length),
    same: (.data[0].embedding == .data[1].embedding), other: (.data[0].embedding != .data[2].embedding)}'
for mode in config last; do
    if [[ $mode == config ]]; then start_server embed tests/data/embedding-mean
    else start_server embed-last tests/data/embedding-mean --pooling last --no-normalize; fi
    post /v1/embeddings "$embed_two"
    facts=$(jq -c "$embed_facts" "$tmp/body" 2>/dev/null)
    norm_ok=$(jq -r 'if (.n | map(. > 0.99999 and . < 1.00001) | all) then "unit" else "not-unit" end' <<<"$facts" 2>/dev/null)
    want=$([[ $mode == config ]] && echo unit || echo not-unit)
    if [[ $status == 200 ]] && jq -e '.dims == 64 and .same and .other' <<<"$facts" >/dev/null 2>&1 && [[ $norm_ok == "$want" ]]; then
        ok "embeddings ($mode pooling): 64 dimensions, the same input the same vector, length 1 only when normalized"
    else
        fail "embeddings ($mode pooling)" "HTTP $status: $facts ($norm_ok, want $want)" "$(body)"
    fi
    jq -c '.data[0].embedding' "$tmp/body" >"$tmp/embed-$mode.json" 2>/dev/null
    stop_server "$([[ $mode == config ]] && echo embed || echo embed-last)" TERM
done
if grep -qE ' 127\.0\.0\.1 POST /v1/embeddings 200 prompt=[1-9][0-9]* [0-9.]+s$' "$tmp/embed.out"; then
    ok "the access log counts an embeddings request's prompt tokens"
else
    fail "the access log counts an embeddings request's prompt tokens" "$(grep ' 127\.0\.0\.1 ' "$tmp/embed.out" | head -3)"
fi
if ! cmp -s "$tmp/embed-config.json" "$tmp/embed-last.json"; then
    ok "the directory's mean pooling and --pooling last give different vectors"
else
    fail "the directory's mean pooling and --pooling last give different vectors" "$(head -c 200 "$tmp/embed-last.json")"
fi

# --- rerank: a model started as a reranker (--rerank; the bundled model answers with one-token
# words, so --rerank-tokens the,a) scores each document by the probability of its yes between
# yes and no after Qwen3-Reranker's prompt; a server that is not one says so ---
pid=$main_pid url=$main_url
bad "rerank without --rerank: 400 rerank_disabled" 400 null '"rerank_disabled"' /v1/rerank \
    '{"query": "a dog", "documents": ["The dog ran."]}'
"$snug" serve --port 0 --memory 256MiB --max-model-len 512 --rerank >"$tmp/rr.out" 2>"$tmp/rr.err"
rc=$?
if [[ $rc -ne 0 ]] && grep -q "the answer 'yes' is not one token" "$tmp/rr.err"; then
    ok "--rerank with answers that are not one token each: the server does not start, and says why"
else
    fail "--rerank with answers that are not one token each" "exit $rc" "$(tail -2 "$tmp/rr.err")"
fi
start_server rerank --max-model-len 512 --rerank --rerank-tokens the,a
docs='["The dog ran to the park.", "A cat sat.", {"text": "Lily played with her ball."}, "The dog barked."]'
post /v1/rerank "{\"query\": \"a dog\", \"documents\": $docs}"
cp "$tmp/body" "$tmp/rerank-all.json"
post /rerank "{\"query\": \"a dog\", \"documents\": [\"A cat sat.\"], \"return_documents\": false}"
cp "$tmp/body" "$tmp/rerank-one.json"
post /v1/rerank "{\"query\": \"a dog\", \"documents\": $docs, \"top_n\": 2}"
facts=$(jq -c -s '.[0].results as $r | {
    sorted: ([$r[].relevance_score] == ([$r[].relevance_score] | sort | reverse)),
    in01: ([$r[].relevance_score] | map(. > 0 and . < 1) | all),
    perm: ([$r[].index] | sort == [0, 1, 2, 3]),
    texts: ([$r[] | .document.text] == [$r[].index | ["The dog ran to the park.", "A cat sat.",
        "Lily played with her ball.", "The dog barked."][.]]),
    alone: ((.[1].results[0].relevance_score - ($r[] | select(.index == 1) | .relevance_score)) | fabs < 1e-6),
    nodoc: (.[1].results[0] | has("document") | not),
    top2: ([.[2].results[].index] == [$r[0:2][].index]), tokens: (.[0].usage.total_tokens > 0)}' \
    "$tmp/rerank-all.json" "$tmp/rerank-one.json" "$tmp/body" 2>/dev/null)
if jq -e 'all(.[]; .)' <<<"$facts" >/dev/null 2>&1; then
    ok "rerank: every document scored in (0, 1), most relevant first, its text; alone as in a batch; top_n the first n; /rerank too"
else
    fail "rerank" "$facts" "$(head -c 600 "$tmp/rerank-all.json")"
fi
bad "rerank without a query: 400 naming it" 400 '"query"' null /v1/rerank '{"documents": ["a"]}'
bad "rerank with no documents: 400 naming them" 400 '"documents"' null /v1/rerank '{"query": "q", "documents": []}'
bad "rerank with an unknown field: 400 naming it" 400 '"texts"' null /v1/rerank '{"query": "q", "documents": ["a"], "texts": 1}'
stop_server rerank TERM
# a sequence classifier (tests/data/rerank-classifier: a head of one label) reranks as it is, each
# relevance the sigmoid of its score; it does not generate
start_server classifier tests/data/rerank-classifier --max-model-len 512
post /v1/rerank "{\"query\": \"a dog\", \"documents\": $docs}"
cp "$tmp/body" "$tmp/cls-all.json"
post /v1/rerank '{"query": "a dog", "documents": ["A cat sat."]}'
facts=$(jq -c -s '.[0].results as $r | {n: ($r | length == 4),
    sorted: ([$r[].relevance_score] == ([$r[].relevance_score] | sort | reverse)),
    in01: ([$r[].relevance_score] | map(. > 0 and . < 1) | all),
    alone: ((.[1].results[0].relevance_score - ($r[] | select(.index == 1) | .relevance_score)) | fabs < 1e-6)}' \
    "$tmp/cls-all.json" "$tmp/body" 2>/dev/null)
if jq -e 'all(.[]; .)' <<<"$facts" >/dev/null 2>&1; then
    ok "a sequence classifier reranks without --rerank: scores in (0, 1), most relevant first, alone as in a batch"
else
    fail "a sequence classifier reranks" "$facts" "$(head -c 600 "$tmp/cls-all.json")"
fi
bad "a sequence classifier does not generate: 400 model_does_not_generate" 400 null '"model_does_not_generate"' \
    /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}'
stop_server classifier TERM

# --- speculative decoding (--prompt-lookup): greedy text the same drafted, turned off for the
# request ("speculative": false) and capped ("speculative.n_max"); /metrics counts the drafts
# (none for the request that turned them off); bad values are 400s naming the field ---
start_server spec --prompt-lookup --num-speculative-tokens 6 --max-model-len 512
story="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends."
spec_body() { jq -nc --arg p "$story $story Once upon" --argjson more "${1:-{\}}" \
    '{prompt: $p, max_tokens: 64, temperature: 0, ignore_eos: true} + $more'; }
post /v1/completions "$(spec_body)"
spec_drafted=$(jq -r '.choices[0].text' "$tmp/body")
d1=$(metric snug_spec_decode_num_draft_tokens_total) a1=$(metric snug_spec_decode_num_accepted_tokens_total)
post /v1/completions "$(spec_body '{"speculative": false}')"
spec_plain=$(jq -r '.choices[0].text' "$tmp/body")
d2=$(metric snug_spec_decode_num_draft_tokens_total)
post /v1/completions "$(spec_body '{"speculative.n_max": 2}')"
spec_capped=$(jq -r '.choices[0].text' "$tmp/body")
if [[ -n $spec_plain && $spec_drafted == "$spec_plain" && $spec_capped == "$spec_plain" && -n $d1 && $d1 -gt 0 &&
    -n $a1 && $a1 -gt 0 && $d2 == "$d1" ]]; then
    ok "prompt lookup: the same greedy text drafted, opted out and capped; $d1 tokens drafted, $a1 accepted, none opted out"
else
    fail "prompt lookup: the same greedy text" "drafted '$spec_drafted'" "plain '$spec_plain'" "capped '$spec_capped'" \
        "drafted $d1, accepted $a1, after the opt-out $d2"
fi
badc "speculative a string -> 400" 400 '"speculative"' null '{"prompt": "x", "speculative": "no"}'
badc "speculative.n_max over the most -> 400" 400 '"speculative.n_max"' null '{"prompt": "x", "speculative.n_max": 17}'
stop_server spec TERM

# --- SIGTERM, with a stream in flight: it is finished, then the server exits 0 ---
pid=$main_pid url=$main_url
: >"$tmp/draining"
curl -sN --max-time 30 -o "$tmp/draining" -H 'Content-Type: application/json' --data-binary \
    '{"prompt": "Once upon a time", "max_tokens": 240, "n": 16, "temperature": 1, "ignore_eos": true, "stream": true}' \
    "$url/v1/completions" &
curl_pid=$!
for ((i = 0; i < 500; i++)); do [[ -s $tmp/draining ]] && break; sleep 0.01; done # its first event
stop_server main TERM
wait "$curl_pid"
sse_parse "$tmp/draining"
if [[ -z $sse_err ]] && [[ $(wc -l <"$tmp/events.jsonl") -eq 3840 ]]; then
    ok "a stream in flight at SIGTERM is finished (3840 events, data: [DONE])"
else
    fail "a stream in flight at SIGTERM is finished (3840 events, data: [DONE])" "$sse_err" \
        "$(wc -l <"$tmp/events.jsonl") events"
fi

# --- the access log: a line per request on stdout; --no-access-log has none ---
if grep -qE '^[0-9-]+T[0-9:]+Z 127\.0\.0\.1 POST /v1/completions 200 prompt=[0-9]+ cached=[0-9]+ completion=[0-9]+ ttft=[0-9.]+s [0-9.]+s$' "$tmp/main.out" &&
    grep -qE ' 127\.0\.0\.1 GET /health 200 [0-9.]+s$' "$tmp/main.out" &&
    grep -qE ' 127\.0\.0\.1 POST /v1/completions 400 prompt=0 ' "$tmp/main.out" &&
    grep -qE ' GET /nope 404 ' "$tmp/main.out"; then
    ok "the access log: $(grep -c ' 127\.0\.0\.1 ' "$tmp/main.out") lines, with status, tokens, TTFT and duration"
else
    fail "the access log" "$(grep ' 127\.0\.0\.1 ' "$tmp/main.out" | head -5)"
fi

summary
