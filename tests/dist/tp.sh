#!/usr/bin/env bash
# Tensor parallelism over Open MPI on this one machine (mpirun --oversubscribe), for tp 2 and 4,
# on the bundled stories260K (4 KV heads: split) and a synthetic GQA model of its shape with 2 KV
# heads (at tp 4 each rank holds one KV head, replicated on two ranks):
#   - every logit of a script of steps (prefill chunks, two sequences, decodes) through the
#     stepper against the whole model in one process, within 1e-4 relative (test_dist, f32);
#   - greedy ids of `snug generate --tp N` equal to tp 1's; greedy ids (return_tokens_as_token_ids)
#     and text over HTTP from `snug serve --tp N` equal to tp 1's generate, also when the prefix
#     cache serves a repeated prompt and a chat's next turn;
#   - each rank's weights in `snug profile --tp N` equal to the parameter table's prediction
#     (and to `snug inspect --tp N`), and --load-only: all ranks together read the checkpoint
#     once;
#   - start-up checks: a --tp that is not the number of processes, a tp that does not divide the
#     model, ranks given different models: one message, every process exits non-zero;
#   - faults: a rank killed (SIGKILL) or stopped (SIGSTOP, a hang) during a streaming request
#     fails the server alike: the stream ends with an engine_failed error event, /health answers
#     503 until the server stops, JSON requests get a 500 engine_failed, and every process exits
#     (a killed rank within about a second, a stopped one within the step timeout);
#   - two "hosts": ranks started through Open MPI's remote launcher (tests/dist/rsh-here, an rsh
#     agent that runs the command on this machine: one daemon per host, as over ssh) talking
#     over TCP only (loopback; no network namespaces, which would need more than the tests can
#     assume of a CI machine).
# As root it passes Open MPI's run-as-root settings. Skips (one "ok - skipped" line) only when
# mpirun is absent or snug was built without MPI. Usage: tests/dist/tp.sh BUILD_DIR.
set -u
build=${1:-build}
[[ -d $build ]] && build=$(cd "$build" && pwd)
snug="$build/snug"
cd "$(dirname "$0")/../.." || exit 1
passed=0 failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }
summary() { echo "$passed passed, $failed failed"; [[ $failed -eq 0 ]]; }

if ! command -v mpirun >/dev/null 2>&1; then
    ok "skipped: mpirun is not installed (scripts/install-deps installs openmpi-bin)"
    summary; exit 0
fi
if ! grep -q SNUG_HAVE_MPI "$build/mpi-flags" 2>/dev/null; then
    ok "skipped: $snug was built without MPI (make MPI=0)"
    summary; exit 0
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    pkill -KILL -f "$tmp" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# Open MPI refuses root without these (tests and docs pass them; never set them for a user)
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# one host, shared memory between the ranks; no network interfaces needed
mpi() { local n=$1; shift; timeout 300 mpirun --oversubscribe --bind-to none -np "$n" --mca btl self,vader "$@"; }
# same_ids WHAT WANT GOT: ok when GOT is the ids WANT (not empty), else a failure with both and the log's end.
same_ids() {
    if [[ -n $2 && $3 == "$2" ]]; then ok "$1 ($(wc -w <<<"$2") ids)"
    else fail "$1" "want: $2" "got: $3" "$(tail -5 "$tmp/gn.err")"; fi
}

stories=models/stories260K
gqa=$tmp/gqa
"$snug" mkmodel --preset tiny --dtype f32 --kv-heads 2 --seed 3 "$gqa" 2>"$tmp/mk.err" || fail "mkmodel gqa" "$(cat "$tmp/mk.err")"
cp $stories/tokenizer.json $stories/tokenizer_config.json "$gqa/"

# --- logits of the stepper against one process --------------------------------------
for run in "2 $stories" "4 $stories" "2 $gqa" "4 $gqa"; do
    read -r n dir <<<"$run"
    if mpi "$n" "$build/tests/test_dist" "$dir" >"$tmp/td.out" 2>&1 && grep -q '^1 passed, 0 failed$' "$tmp/td.out"; then
        ok "tp $n logits = one process within 1e-4 ($(basename "$dir"): $(grep -o 'max relative error [^ ]*' "$tmp/td.out"))"
    else
        fail "tp $n logits = one process ($(basename "$dir"))" "$(tail -8 "$tmp/td.out")"
    fi
done

# --- greedy ids of generate -------------------------------------------------------------
gen_args=(-p "Once upon a time" -n 40 --temperature 0 --ignore-eos --ids --threads 1)
# (and a GGUF file as it is, F32, each rank reading its slices)
for dir in $stories $gqa tests/data/stories260K/stories260K.gguf; do
    want=$("$snug" generate "$dir" "${gen_args[@]}" 2>"$tmp/g1.err")
    for n in 2 4; do
        got=$(mpi "$n" "$snug" generate "$dir" "${gen_args[@]}" --tp "$n" 2>"$tmp/gn.err")
        if [[ -n $want && $got == "$want" ]]; then
            ok "generate --tp $n: greedy ids = tp 1 ($(basename "$dir"), $(wc -w <<<"$want") ids)"
        else
            fail "generate --tp $n: greedy ids = tp 1 ($(basename "$dir"))" "tp 1: $want" "tp $n: $got" \
                "$(tail -5 "$tmp/gn.err")"
        fi
    done
done

# llama.cpp's Q4_0 file, each rank reading whole blocks: its greedy ids up to llama.cpp's first
# small margin (tests/data/quant/greedy.txt). (Further on, 8-bit activations make a last-bit
# difference of the all-reduce's order a whole step of a level now and then: the runs may part
# where two tokens are within a hair, as llama.cpp's do between machines.)
qfix=tests/data/quant/greedy.txt
want=$(awk '$0 == "file = q7-Q4_0.gguf" {g=1} g && /^ids = /{sub(/^ids = /,""); print; exit}' "$qfix")
prompt=$(awk '$0 == "file = q7-Q4_0.gguf" {g=1} g && /^prompt = /{sub(/^prompt = /,""); print; exit}' "$qfix")
n_new=$(( $(wc -w <<<"$want") - $("$snug" tokenize tests/data/quant/q7-Q4_0.gguf "$prompt" | wc -w) ))
for n in 2 4; do
    got=$(mpi "$n" "$snug" generate tests/data/quant/q7-Q4_0.gguf -p "$prompt" -n "$n_new" --temperature 0 --ids \
          --threads 1 --tp "$n" 2>"$tmp/gn.err")
    same_ids "generate --tp $n: llama.cpp's greedy ids (q7-Q4_0.gguf)" "$want" "$got"
done
# each rank's heads in a Q8_0 KV cache of their own
got=$(mpi 2 "$snug" generate tests/data/quant/q7-Q4_0.gguf -p "$prompt" -n "$n_new" --temperature 0 --ids \
      --threads 1 --tp 2 --kv-cache-dtype q8_0 2>"$tmp/gn.err")
same_ids "generate --tp 2 --kv-cache-dtype q8_0: llama.cpp's greedy ids (q7-Q4_0.gguf)" "$want" "$got"

# speculative decoding over 2 ranks: prompt lookup's drafts verified in one step, every row of
# logits gathered (sampling) or only their argmaxes (greedy), the ids of tp 1 without drafts; a
# draft model is refused with tensor parallelism, naming it
story="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends."
spec_args=(-p "$story $story Once upon" -n 60 --ignore-eos --ids --threads 1)
for sampling in "--temperature 0" "--temperature 0.8 --seed 4"; do
    # shellcheck disable=SC2086 # the options, split on purpose
    want=$("$snug" generate $stories "${spec_args[@]}" $sampling 2>"$tmp/g1.err")
    # shellcheck disable=SC2086
    got=$(mpi 2 "$snug" generate $stories "${spec_args[@]}" $sampling --tp 2 --prompt-lookup 2>"$tmp/gn.err")
    if [[ -n $want && $got == "$want" ]] && grep -q '^speculative: .* [1-9][0-9]* accepted' "$tmp/gn.err"; then
        ok "generate --tp 2 --prompt-lookup ($sampling): the ids of tp 1 without drafts, drafts kept"
    else
        fail "generate --tp 2 --prompt-lookup ($sampling)" "tp 1: $want" "tp 2: $got" "$(tail -3 "$tmp/gn.err")"
    fi
done
mpi 2 "$snug" generate $stories -p "Once" -n 4 --threads 1 --tp 2 --draft-model $stories >/dev/null 2>"$tmp/gn.err"
if grep -q -- "--draft-model: not with tensor parallelism (--tp 2)" "$tmp/gn.err"; then
    ok "--draft-model with --tp 2 is refused, naming it"
else
    fail "--draft-model with --tp 2 is refused" "$(tail -3 "$tmp/gn.err")"
fi

# The other families' llama.cpp files (tests/data/arch, Q8_0): Qwen2 (q/k/v biases, tied) and
# Qwen3 (a norm per q and k head) split over 2 ranks give llama.cpp's 24 greedy ids (every margin
# between its top two logits is 0.6 or more). Phi-3's fused tensors split per rank are checked
# against the float64 reference in test_model (its file's margins go down to 0.09).
afix=tests/data/arch/greedy.txt
for fam in qwen2 qwen3; do
    file=tests/data/arch/f7-$fam-Q8_0.gguf
    ids() { awk -v f="file = f7-$fam-Q8_0.gguf" -v k="$1 = " '$0 == f {g=1} g && index($0, k) == 1 {sub(k, ""); print; exit}' "$afix"; }
    want="$(ids prompt_ids) $(ids greedy)"
    got=$(mpi 2 "$snug" generate "$file" -p "$(ids prompt)" -n 24 --temperature 0 --ids --threads 1 --tp 2 \
          2>"$tmp/gn.err")
    same_ids "generate --tp 2: llama.cpp's greedy ids (f7-$fam-Q8_0.gguf)" "$want" "$got"
done

# Gemma 3 (tests/data/arch/f7-gemma3-Q8_0.gguf: a window of 8 on five layers of six, their own
# rope base, norms after attention and MLP) split over 2 ranks: the ids one rank gives, 38 positions,
# across the window many times (llama.cpp's own ids diverge at a first step whose margin is 0.3);
# and the bundled model with a window of 8 on every layer (tests/data/mistral-window8), whose other
# cache holds positions only.
gprompt="One day, a little bird flew over the"
for file in tests/data/arch/f7-gemma3-Q8_0.gguf tests/data/mistral-window8; do
    # With --max-model-len 128 the windowed layers keep only their windows, a cache group of their
    # own on each rank; --swa-full keeps every position in one; both give one rank's ids of one group.
    want=$("$snug" generate "$file" -p "$gprompt" -n 40 --temperature 0 --ids --threads 1 --swa-full 2>"$tmp/gn.err")
    for opt in --swa-full --max-model-len; do
        val=(); [[ $opt == --max-model-len ]] && val=(128)
        got=$(mpi 2 "$snug" generate "$file" -p "$gprompt" -n 40 --temperature 0 --ids --threads 1 --tp 2 \
              "$opt" "${val[@]}" 2>>"$tmp/gn.err")
        same_ids "generate --tp 2 $opt ${val[*]}: tp 1's ids (${file##*/}, windows of 8)" "$want" "$got"
    done
done

# --- each rank's weights ----------------------------------------------------------------
for n in 2 4; do
    "$snug" inspect $stories --tp "$n" --json >"$tmp/inspect.json" 2>&1
    predicted=$(jq -c '.rank_weight_bytes' "$tmp/inspect.json")
    mpi "$n" "$snug" profile $stories --tp "$n" --memory 128MiB --max-model-len 256 --json \
        >"$tmp/prof.json" 2>"$tmp/prof.err"
    ranks=$(jq -c '[.ranks[].weight_bytes]' "$tmp/prof.json" 2>/dev/null)
    table=$(jq -c '[.ranks[].weights_predicted_bytes]' "$tmp/prof.json" 2>/dev/null)
    if [[ -n $ranks && $ranks == "$predicted" && $table == "$predicted" ]]; then
        ok "profile --tp $n: each rank's weights = its predicted shard bytes $ranks"
    else
        fail "profile --tp $n: each rank's weights = predicted" "profile: $ranks (table $table)" \
            "inspect: $predicted" "$(tail -3 "$tmp/prof.err")"
    fi
    mpi "$n" "$snug" profile $stories --tp "$n" --load-only --json >"$tmp/load.json" 2>"$tmp/load.err"
    ratio=$(jq -s '.[-1].read_ratio' "$tmp/load.json" 2>/dev/null)
    if [[ -n $ratio && $(jq -n "$ratio <= 1.01 and $ratio > 0.9") == true ]]; then
        ok "profile --tp $n --load-only: all ranks read $ratio of the checkpoint's bytes"
    else
        fail "profile --tp $n --load-only: read ratio <= 1.01" "$(cat "$tmp/load.json")" "$(tail -3 "$tmp/load.err")"
    fi
done

# --- the KV cache: the fewest blocks any rank has room for (rank 1 given less) ---------------
mpirun --oversubscribe --bind-to none --mca btl self,vader \
    -np 1 "$snug" profile $stories --tp 2 --memory 256MiB --max-model-len 512 --max-num-seqs 64 --json : \
    -np 1 "$snug" profile $stories --tp 2 --memory 256MiB --max-model-len 512 --max-num-seqs 64 \
    --kv-cache-memory 2MiB --json \
    >"$tmp/mpmd.json" 2>"$tmp/mpmd.err"
kv=$(jq -c '[.kv_blocks, .ranks[0].kv_blocks_own, .ranks[1].kv_blocks_own, .kv_limited_by]' "$tmp/mpmd.json" 2>/dev/null)
if [[ $(jq '.[0] == .[2] and .[1] > .[2] and .[3] == "other_rank"' <<<"$kv" 2>/dev/null) == true ]]; then
    ok "the KV cache gets the fewest blocks any rank has room for [blocks, rank 0's room, rank 1's room, limit] $kv"
else
    fail "the KV cache gets the fewest blocks any rank has room for" "$kv" "$(tail -3 "$tmp/mpmd.err")"
fi

# --- start-up checks: one message, everyone exits non-zero --------------------------------
# expect_startup NAME TEXT CMD...: fails non-zero, says TEXT once
expect_startup() {
    local name=$1 text=$2; shift 2
    timeout 60 "$@" >"$tmp/st.out" 2>"$tmp/st.err"
    local rc=$? count
    count=$(grep -c -- "$text" "$tmp/st.err")
    if [[ $rc -ne 0 && $rc -ne 124 && $count -eq 1 ]]; then
        ok "$name: exit $rc, one message"
    else
        fail "$name" "exit $rc, '$text' seen $count times" "$(head -c 600 "$tmp/st.err")"
    fi
}
expect_startup "--tp 3 under mpirun -np 2" "tp must equal the number of processes" \
    mpirun --oversubscribe -np 2 --mca btl self,vader "$snug" generate --tp 3 -n 2
expect_startup "--tp 3 does not divide the model" "sizes that work: 1, 2, 4" \
    mpirun --oversubscribe -np 3 --mca btl self,vader "$snug" generate --tp 3 -n 2 --threads 1
expect_startup "ranks given different models" "has another config.json than rank 0" \
    mpirun --oversubscribe --mca btl self,vader -np 1 "$snug" generate $stories --tp 2 -n 2 : \
    -np 1 "$snug" generate "$gqa" --tp 2 -n 2
expect_startup "a rank whose model directory is missing" "rank 1 of 2" \
    mpirun --oversubscribe --mca btl self,vader -np 1 "$snug" generate $stories --tp 2 -n 2 : \
    -np 1 "$snug" generate "$tmp/nothing" --tp 2 -n 2

# --- two hosts: a daemon per host through the remote launcher, TCP between the ranks -------
printf 'localhost slots=1\nhost-b slots=1\n' >"$tmp/hosts"
want=$("$snug" generate $stories "${gen_args[@]}" 2>/dev/null)
got=$(timeout 120 mpirun --hostfile "$tmp/hosts" --mca plm_rsh_agent "$PWD/tests/dist/rsh-here" \
    --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np 2 \
    "$snug" generate $stories "${gen_args[@]}" --tp 2 2>"$tmp/hosts.err")
if [[ -n $want && $got == "$want" ]]; then
    ok "two hosts (mpirun --hostfile, a daemon each, TCP only): greedy ids = tp 1"
else
    fail "two hosts: greedy ids = tp 1" "tp 1: $want" "two hosts: $got" "$(tail -5 "$tmp/hosts.err")"
fi

# --- serving: greedy text over HTTP ----------------------------------------------------------
# start_tp NAME N ARGS...: mpirun -np N snug serve --tp N; sets $mpid, $url
start_tp() {
    local name=$1 n=$2; shift 2
    mpirun --oversubscribe --bind-to none -np "$n" --mca btl self,vader "$snug" serve --tp "$n" \
        --port 0 --threads 1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    mpid=$!
    pids+=("$mpid")
    local i line=
    for ((i = 0; i < 600; i++)); do
        line=$(grep -s -m1 '^serving .* on http://' "$tmp/$name.out")
        [[ -n $line ]] && break
        kill -0 "$mpid" 2>/dev/null || break
        sleep 0.1
    done
    url=
    [[ $line =~ on\ (http://[0-9.]+:[0-9]+) ]] && url=${BASH_REMATCH[1]}
    if [[ -n $url ]]; then ok "$name: serving ($url)"; else fail "$name: serving" "$(tail -5 "$tmp/$name.err")"; fi
}
# stop_tp: SIGTERM to mpirun; every process gone within 30 s
stop_tp() {
    kill -TERM "$mpid" 2>/dev/null
    local i
    for ((i = 0; i < 300; i++)); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$mpid" 2>/dev/null; then fail "$1: stopped" "mpirun still runs after 30 s"; kill -KILL "$mpid"; fi
    wait "$mpid" 2>/dev/null
}

prompt="Once upon a time"
for run in "2 $stories" "4 $gqa"; do
    read -r n dir <<<"$run"
    name="serve-tp$n-$(basename "$dir")"
    start_tp "$name" "$n" "$dir" --memory 256MiB --max-model-len 256
    [[ -n $url ]] || continue
    "$snug" generate "$dir" -p "$prompt" -n 30 --temperature 0 --ignore-eos --threads 1 >"$tmp/gen.txt" 2>/dev/null
    curl -s -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
        -d "$(jq -nc --arg p "$prompt" '{prompt: $p, max_tokens: 30, temperature: 0, ignore_eos: true}')" >"$tmp/body"
    printf '%s%s\n' "$prompt" "$(jq -j '.choices[0].text' "$tmp/body")" >"$tmp/http.txt"
    if cmp -s "$tmp/gen.txt" "$tmp/http.txt"; then
        ok "$name: greedy over HTTP = tp 1 generate"
    else
        fail "$name: greedy over HTTP = tp 1 generate" "generate: $(cat "$tmp/gen.txt")" "HTTP: $(head -c 400 "$tmp/body")"
    fi
    want_ids=$("$snug" generate "$dir" -p "$prompt" -n 30 --temperature 0 --ignore-eos --threads 1 --ids 2>/dev/null)
    curl -s -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
        -d "$(jq -nc --arg p "$prompt" '{prompt: $p, max_tokens: 30, temperature: 0, ignore_eos: true,
            logprobs: 0, echo: true, return_tokens_as_token_ids: true}')" >"$tmp/body"
    got_ids=$(jq -r '[.choices[0].logprobs.tokens[] | ltrimstr("token_id:")] | join(" ")' "$tmp/body" 2>/dev/null)
    if [[ -n $want_ids && $got_ids == "$want_ids" ]]; then
        ok "$name: greedy ids over HTTP = tp 1 generate --ids"
    else
        fail "$name: greedy ids over HTTP = tp 1 generate --ids" "tp 1: $want_ids" "HTTP: $got_ids"
    fi
    # a batch: 8 streams at once, each the same greedy text
    for k in 1 2 3 4 5 6 7 8; do
        curl -s -N -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
            -d "$(jq -nc --arg p "$prompt" '{prompt: $p, max_tokens: 30, temperature: 0, ignore_eos: true, stream: true}')" \
            >"$tmp/s$k" &
    done
    wait $(jobs -p | grep -v "^$mpid$") 2>/dev/null
    same=0
    for k in 1 2 3 4 5 6 7 8; do
        t=$(sed -n 's/^data: //p' "$tmp/s$k" | grep -v '^\[DONE\]' | jq -j '.choices[0].text // empty')
        [[ "$prompt$t" == "$(cat "$tmp/gen.txt")" ]] && same=$((same + 1))
    done
    if [[ $same -eq 8 ]]; then ok "$name: 8 streams at once, each = tp 1 generate"; else fail "$name: 8 streams" "$same of 8 equal"; fi
    # prefix caching under tensor parallelism: a long prompt twice (the second finds its whole
    # blocks), then a second turn (the first's prompt and answer, and more): each = tp 1 generate
    long="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her big dog Max."
    cached=()
    for turn in 1 2 3; do
        p=$long
        [[ $turn == 3 ]] && p="$long$answer One day, Lily and Max went to the river."
        curl -s -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
            -d "$(jq -nc --arg p "$p" '{prompt: $p, max_tokens: 20, temperature: 0, ignore_eos: true}')" >"$tmp/body"
        answer=$(jq -j '.choices[0].text' "$tmp/body")
        cached+=("$(jq -r '.usage.prompt_tokens_details.cached_tokens' "$tmp/body")")
        want=$("$snug" generate "$dir" -p "$p" -n 20 --temperature 0 --ignore-eos --threads 1 2>/dev/null)
        if [[ "$p$answer" == "$want" ]]; then
            ok "$name: prefix caching, request $turn (cached_tokens ${cached[-1]}) = tp 1 generate"
        else
            fail "$name: prefix caching, request $turn = tp 1 generate" "tp 1: $want" "HTTP: $p$answer"
        fi
    done
    if [[ ${cached[1]} -ge 16 && ${cached[1]} -ge ${cached[0]} && ${cached[2]} -ge ${cached[1]} ]]; then
        ok "$name: cached_tokens ${cached[*]}: the repeat and the next turn find whole blocks"
    else
        fail "$name: cached_tokens of a repeat and a next turn" "${cached[*]}"
    fi
    metrics=$(curl -s "$url/metrics")
    tp_size=$(sed -n 's/^snug_tensor_parallel_size //p' <<<"$metrics")
    ar=$(sed -n 's/^snug_allreduce_total //p' <<<"$metrics")
    if [[ $tp_size == "$n" && ${ar:-0} -gt 0 ]]; then
        ok "$name: /metrics: tensor_parallel_size $tp_size, $ar all-reduces"
    else
        fail "$name: /metrics shows tp and all-reduces" "size '$tp_size', all-reduces '$ar'"
    fi
    health=$(curl -s -o /dev/null -w '%{http_code}' "$url/health")
    [[ $health == 200 ]] && ok "$name: /health 200" || fail "$name: /health 200" "got $health"
    grep -q '^rank 1 of' "$tmp/$name.out" && ok "$name: the report has each rank's line" ||
        fail "$name: each rank's line" "$(head -12 "$tmp/$name.out")"
    stop_tp "$name"
done

# --- faults: a rank killed or stopped mid-stream ----------------------------------------------
# Either fails the server the same way, a killed rank within about a second (mpirun's SIGCONT,
# which begins its ending of the run, has rank 0 check the ranks: 0.5 s to answer), a stopped one
# at the step timeout (the watchdog): the stream's last event is an error with code
# engine_failed; /health answers 200 until then, then 503 {"status":"failed"} until the server
# stops; a JSON completion sent just after the signal gets a 500 with code engine_failed, and one
# sent at the first 503 the same (or a refused connection: the server had stopped); rank 0 says
# so and exits, and every process is gone.
big=$tmp/big
"$snug" mkmodel --preset tiny --dtype bf16 --hidden 1024 --heads 16 --kv-heads 4 --intermediate 2816 \
    --layers 8 "$big" 2>/dev/null && cp $stories/tokenizer.json $stories/tokenizer_config.json "$big/"
timeout_s=5
# rank_pid N: the pid of rank N of the running job (its environment says its rank)
rank_pid() {
    local p
    for p in $(pgrep -f "$snug serve"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
    done
}
# post_json OUT: a small JSON completion to $url; OUT gets the body, OUT.code "HTTP_CODE CURL_EXIT"
post_json() {
    curl -s -m 60 -o "$1" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 8}' >"$1.code"
    echo " $?" >>"$1.code"
}
# json_failed OUT: OUT is a 500 whose error's code is engine_failed
json_failed() { [[ $(cut -d' ' -f1 "$1.code") == 500 && $(jq -r '.error.code' "$1" 2>/dev/null) == engine_failed ]]; }
for sig in KILL STOP; do
    name="fault-$sig"
    start_tp "$name" 2 "$big" --memory 1GiB --max-model-len 512 --max-num-batched-tokens 64 \
        --max-num-seqs 4 --step-timeout $timeout_s
    [[ -n $url ]] || continue
    curl -s -N -m 120 "$url/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 480, "ignore_eos": true, "stream": true}' >"$tmp/$name.sse" &
    cpid=$!
    for ((i = 0; i < 300; i++)); do [[ $(grep -c '^data: ' "$tmp/$name.sse") -ge 3 ]] && break; sleep 0.05; done
    victim=$(rank_pid 1)
    t0=$(date +%s.%N)
    kill -"$sig" "$victim"
    post_json "$tmp/$name.j1" &
    jpid=$!
    # /health every 0.1 s until nobody answers: each answer as CODE/STATUS, repeats folded
    seen=() j2pid=
    for ((i = 0; i < 10 * (timeout_s + 15); i++)); do
        b=$(curl -s -m 1 -w ' %{http_code}' "$url/health")
        h=${b##* }
        st=$(jq -r '.status' <<<"${b% *}" 2>/dev/null)
        [[ $h == 000 ]] && st=
        [[ ${#seen[@]} -gt 0 && ${seen[-1]} == "$h${st:+/$st}" ]] || seen+=("$h${st:+/$st}")
        if [[ $h == 503 && -z $j2pid ]]; then post_json "$tmp/$name.j2" & j2pid=$!; fi
        [[ $h == 000 ]] && break
        sleep 0.1
    done
    wait "$cpid"
    crc=$?
    wait "$jpid"
    [[ -n $j2pid ]] && wait "$j2pid"
    chunks=$(grep -c '^data: {' "$tmp/$name.sse")
    last=$(grep '^data: ' "$tmp/$name.sse" | tail -1)
    if [[ $last == *'"code":"engine_failed"'* && $chunks -lt 481 ]] && ! grep -q '^data: \[DONE\]' "$tmp/$name.sse"; then
        ok "$name: the stream's last event is an engine_failed error, after $chunks chunks (curl exit $crc)"
    else
        fail "$name: the stream ends with an engine_failed error event" "$chunks chunks, curl exit $crc" \
            "$(tail -c 300 "$tmp/$name.sse")"
    fi
    if [[ "${seen[*]}" =~ ^(200/ok )?503/failed\ 000$ ]]; then
        ok "$name: /health ${seen[*]} (200 until the failure, then 503 failed until the server stopped)"
    else
        fail "$name: /health 200, then 503 failed, then nobody" "${seen[*]}"
    fi
    if json_failed "$tmp/$name.j1"; then
        ok "$name: a JSON completion sent just after the SIG$sig: 500 engine_failed"
    else
        fail "$name: a JSON completion sent just after the SIG$sig: 500 engine_failed" \
            "$(cat "$tmp/$name.j1.code"): $(head -c 300 "$tmp/$name.j1")"
    fi
    if [[ -n $j2pid ]] && { json_failed "$tmp/$name.j2" || [[ $(cat "$tmp/$name.j2.code") == "000 7" ]]; }; then
        ok "$name: a JSON completion sent at the first 503: $(cut -d' ' -f1 "$tmp/$name.j2.code") $(jq -r '.error.code' "$tmp/$name.j2" 2>/dev/null || echo refused)"
    else
        fail "$name: a JSON completion sent at the first 503: 500 engine_failed, or refused" \
            "$(cat "$tmp/$name.j2.code" 2>/dev/null): $(head -c 300 "$tmp/$name.j2" 2>/dev/null)"
    fi
    for ((i = 0; i < 400; i++)); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.05; done
    left=$(pgrep -f "$snug serve" | wc -l)
    took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    wait "$mpid"
    rc=$?
    limit=$timeout_s
    [[ $sig == KILL ]] && limit=0 # no step timeout to wait for
    if ! kill -0 "$mpid" 2>/dev/null && [[ $left -eq 0 && $rc -ne 0 ]] && awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l + 10) }'; then
        ok "$name: every process exited within $limit + 10 s ($took s, mpirun exit $rc)"
    else
        fail "$name: every process exited" "after $took s: mpirun $(kill -0 "$mpid" 2>/dev/null && echo running || echo "exited $rc"), $left snug left" \
            "$(tail -5 "$tmp/$name.err")"
        pkill -KILL -f "$snug serve"
    fi
    # rank 0 saw it (the launcher's signal, or the watchdog) and ended on its own path
    if [[ $sig == KILL ]]; then why="SIGCONT from the launcher"; else why="(--step-timeout $timeout_s)"; fi
    if grep -qF -- "$why" "$tmp/$name.err" && grep -q "the engine failed: .*a rank died or hangs" "$tmp/$name.err" &&
        grep -q "^snug: stopped after the engine failed" "$tmp/$name.err"; then
        ok "$name: rank 0 said why ($why) and stopped after the engine failed"
    else
        fail "$name: rank 0's messages" "$(grep '^snug: ' "$tmp/$name.err" | tail -5)"
    fi
done

# --- SIGTERM to rank 0: the stream in flight finishes, then every rank exits 0 -------------
name=drain
start_tp "$name" 2 "$big" --memory 1GiB --max-model-len 512 --max-num-batched-tokens 64 --max-num-seqs 4
if [[ -n $url ]]; then
    curl -s -N -m 120 "$url/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 100, "ignore_eos": true, "stream": true}' >"$tmp/$name.sse" &
    cpid=$!
    for ((i = 0; i < 300; i++)); do [[ $(grep -c '^data: ' "$tmp/$name.sse") -ge 3 ]] && break; sleep 0.05; done
    kill -TERM "$(rank_pid 0)"
    wait "$cpid"
    wait "$mpid"
    rc=$?
    chunks=$(grep -c '^data: {' "$tmp/$name.sse")
    if [[ $rc -eq 0 && $chunks -eq 100 ]] && grep -q '^data: \[DONE\]' "$tmp/$name.sse"; then
        ok "$name: SIGTERM to rank 0 drains: the stream got all 100 tokens and [DONE], every rank exited 0"
    else
        fail "$name: SIGTERM to rank 0 drains" "mpirun exit $rc, $chunks chunks" "$(tail -c 200 "$tmp/$name.sse")" \
            "$(tail -3 "$tmp/$name.err")"
    fi
fi

summary
