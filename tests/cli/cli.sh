#!/usr/bin/env bash
# Command-line tests of build/snug: inspect, mkmodel and convert, their
# output, their exit statuses and their error messages.
# Usage: tests/cli/cli.sh BUILD_DIR. Prints "ok - ..." / "FAIL - ..." lines
# and a final "N passed, M failed" (see tests/run).
set -u
build=${1:-build}
snug="$build/snug"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }

# expect NAME STATUS PATTERN -- CMD...: CMD exits with STATUS and its output
# (stdout and stderr) contains the fixed string PATTERN.
expect() {
    local name=$1 status=$2 pattern=$3
    shift 4
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [[ $rc -ne $status ]]; then
        fail "$name" "exit status $rc, expected $status" "${out:0:2000}"
    elif ! grep -qF -- "$pattern" <<<"$out"; then
        fail "$name" "output lacks: $pattern" "${out:0:2000}"
    else
        ok "$name"
    fi
}

# json_get FILE FILTER: the value jq prints.
json_get() { jq -c "$2" "$1"; }

expect "inspect text" 0 "parameters: 260,032" -- "$snug" inspect models/stories260K
expect "inspect text bytes" 0 "weights: 1,040,128 bytes (1015.75 KiB) in 47 tensors, 1 file: F32 1,040,128" \
    -- "$snug" inspect models/stories260K
expect "inspect kv per token" 0 "kv cache: 640 bytes per token (bfloat16)" -- "$snug" inspect models/stories260K

"$snug" inspect models/stories260K --tp 2 --json >"$tmp/i.json"
check_json() { # name file filter expected
    local got
    got=$(json_get "$2" "$3")
    if [[ "$got" == "$4" ]]; then ok "$1"; else fail "$1" "$3 = $got, expected $4"; fi
}
check_json "inspect json n_params" "$tmp/i.json" .n_params 260032
check_json "inspect json weight_bytes" "$tmp/i.json" .weight_bytes 1040128
check_json "inspect json kv_bytes_per_token" "$tmp/i.json" .kv_bytes_per_token 640
check_json "inspect json architecture" "$tmp/i.json" .architecture '"LlamaForCausalLM"'
# tp 2: embeddings 256 x 64, per layer (32+16+16) x 64 qkv, 64 x 32 o, 172 x 64 gate_up,
# 64 x 86 down, 2 x 64 norms; final norm 64: 130,368 floats
check_json "inspect json rank bytes tp 2" "$tmp/i.json" .rank_weight_bytes '[521472,521472]'
check_json "inspect json rank kv bytes tp 2" "$tmp/i.json" .rank_kv_bytes_per_token '[320,320]'

expect "inspect tensors" 0 "model.layers.4.mlp.down_proj.weight" -- "$snug" inspect models/stories260K --tensors
"$snug" inspect models/stories260K --tensors --json >"$tmp/t.json"
check_json "inspect json tensors" "$tmp/t.json" \
    '.tensors[] | select(.name == "model.layers.0.self_attn.k_proj.weight") | [.dtype, .shape, .bytes]' \
    '["F32",[32,64],8192]'
expect "inspect --tp that does not fit" 1 \
    "tensor-parallel size 3 does not fit this model: num_attention_heads 8 is not divisible by it; sizes that work: 1, 2, 4" \
    -- "$snug" inspect models/stories260K --tp 3
expect "inspect --dtype bf16 halves rank bytes" 0 "520,064" -- "$snug" inspect models/stories260K --dtype bf16
expect "inspect missing dir" 1 "/nonexistent/config.json: cannot open" -- "$snug" inspect /nonexistent
mkdir "$tmp/fifo" && mkfifo "$tmp/fifo/config.json"
expect "a FIFO is refused, not waited on" 1 "config.json: not a regular file" \
    -- timeout 10 "$snug" inspect "$tmp/fifo"
expect "inspect usage" 2 "usage: snug inspect" -- "$snug" inspect
expect "inspect bad --tp" 2 "--tp expects an integer" -- "$snug" inspect models/stories260K --tp x
expect "fault injection" 1 "failed by fault injection (allocation 5)" \
    -- env SNUG_FAIL_ALLOC=5 "$snug" inspect models/stories260K

# mkmodel: a real shape, sharded, then inspected
expect "mkmodel qwen2-0.5b" 0 "wrote 988,065,536 bytes" \
    -- "$snug" mkmodel --preset qwen2-0.5b --dtype bf16 --shards 2 --seed 3 "$tmp/qwen"
if [[ -f "$tmp/qwen/model-00001-of-00002.safetensors" && -f "$tmp/qwen/model.safetensors.index.json" ]]; then
    ok "mkmodel shard names"
else
    fail "mkmodel shard names" "$(ls "$tmp/qwen")"
fi
"$snug" inspect "$tmp/qwen" --tp 2 --json >"$tmp/q.json"
check_json "qwen2 n_params" "$tmp/q.json" .n_params 494032768
check_json "qwen2 weight_bytes" "$tmp/q.json" .weight_bytes 988065536
check_json "qwen2 rank bytes (tp 2)" "$tmp/q.json" .rank_weight_bytes '[494076672,494076672]'
check_json "qwen2 files" "$tmp/q.json" .n_files 2
expect "qwen2 tp 8" 1 "sizes that work: 1, 2" -- "$snug" inspect "$tmp/qwen" --tp 8
rm -rf "$tmp/qwen"
expect "mkmodel unknown preset" 1 "unknown preset 'gpt-9'; presets: tiny" \
    -- "$snug" mkmodel --preset gpt-9 --dtype bf16 "$tmp/x"
expect "mkmodel no dtype" 2 "no --dtype given" -- "$snug" mkmodel --preset tiny "$tmp/x"
expect "mkmodel same seed" 0 "" -- "$snug" mkmodel --preset tiny --dtype f16 --seed 9 "$tmp/s1"
"$snug" mkmodel --preset tiny --dtype f16 --seed 9 --threads 1 "$tmp/s2" 2>/dev/null
if cmp -s "$tmp/s1/model.safetensors" "$tmp/s2/model.safetensors"; then ok "mkmodel reproducible"; else fail "mkmodel reproducible"; fi

# load
"$snug" load models/stories260K --json >"$tmp/l.json"
check_json "load weight bytes = inspect" "$tmp/l.json" '.weight_bytes' 1040128
check_json "load reads exactly the weights" "$tmp/l.json" '.bytes_read' 1040128
check_json "load json keys" "$tmp/l.json" \
    '[has("rank"), has("weight_bytes"), has("load_peak_bytes"), has("hwm_growth_bytes"), has("bytes_read"), has("seconds")]' \
    '[true,true,true,true,true,true]'
"$snug" load models/stories260K --tp 2 --all-ranks --json --dtype bf16 >"$tmp/l2.json"
check_json "load all ranks" "$tmp/l2.json" '[.rank, .weight_bytes]' '[0,260736]
[1,260736]'
expect "load text table" 0 "load peak (/weights)" -- "$snug" load models/stories260K --tp 4 --rank 3
expect "load rank past tp" 2 "--rank 2 is not below --tp 2" -- "$snug" load models/stories260K --tp 2 --rank 2
expect "load tp that does not fit" 1 "sizes that work: 1, 2, 4" -- "$snug" load models/stories260K --tp 3
expect "load staging too small" 1 "staging of 128 bytes per thread is less than one row" \
    -- "$snug" load models/stories260K --dtype bf16 --staging-bytes 256 --threads 2
# every allocation of a whole `snug load` run failing in turn: a clean exit 1 each time
oom_ok=1 saw_weights=0
for n in $(seq 1 40); do
    out=$(SNUG_FAIL_ALLOC=$n "$snug" load models/stories260K 2>&1)
    rc=$?
    [[ $rc -eq 0 ]] && break
    if [[ $rc -ne 1 ]] || ! grep -q "out of memory" <<<"$out"; then oom_ok=0; echo "  allocation $n: rc $rc: $out"; fi
    grep -q "weights of rank 0: out of memory: weights request of 1040128 bytes" <<<"$out" && saw_weights=1
done
if [[ $oom_ok -eq 1 && $saw_weights -eq 1 && $rc -eq 0 ]]; then ok "load under fault injection"; else fail "load under fault injection"; fi

# convert
expect "convert gguf" 0 "converted" -- "$snug" convert gguf tests/data/stories260K/stories260K.gguf "$tmp/g"
expect "converted gguf inspects" 0 "parameters: 260,032" -- "$snug" inspect "$tmp/g"
expect "convert llama2c" 0 "converted" -- "$snug" convert llama2c tests/data/stories260K/stories260K.bin "$tmp/b"
if cmp -s "$tmp/b/model.safetensors" "$tmp/g/model.safetensors"; then ok "llama2c and gguf imports identical"; else fail "llama2c and gguf imports identical"; fi
expect "convert wrong format" 1 "not a GGUF file" -- "$snug" convert gguf tests/data/stories260K/stories260K.bin "$tmp/x"
expect "convert usage" 2 "unknown format 'onnx'" -- "$snug" convert onnx a b

expect "no command" 2 "usage: snug COMMAND" -- "$snug"
expect "unknown command" 2 "unknown command 'frobnicate'" -- "$snug" frobnicate
expect "help" 0 "commands:" -- "$snug" --help

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
