#!/usr/bin/env bash
# Command-line tests of build/snug: inspect, load, mkmodel, convert, tokenize,
# detokenize and chat-template; their output, exit statuses and error messages (and
# build/bench/mkgguf, whose GGUF the loader test imports, and build/examples/complete;
# make test builds both).
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
expect "mkmodel qwen2-0.5b: the Qwen2 tokenizer and template" 0 "<|im_start|>assistant" \
    -- "$snug" chat-template "$tmp/qwen" --messages tests/data/chat/messages.json --generation-prompt
expect "qwen2 tp 8" 1 "sizes that work: 1, 2" -- "$snug" inspect "$tmp/qwen" --tp 8
"$snug" mkmodel --preset qwen3-1.7b --layers 1 --hidden 64 --heads 2 --kv-heads 1 --intermediate 64 --dtype bf16 \
    "$tmp/qwen3" >/dev/null 2>&1
# (enable_thinking false: the template closes an empty think block after the generation prompt)
expect "mkmodel qwen3-1.7b: Qwen3's template, thinking off" 0 "</think>" \
    -- "$snug" chat-template "$tmp/qwen3" --messages tests/data/chat/messages.json --generation-prompt --kwargs '{"enable_thinking": false}'
expect "mkmodel qwen3-1.7b: <think> and </think> are single tokens" 0 "151667 151668" \
    -- "$snug" tokenize "$tmp/qwen3" "<think></think>"
rm -rf "$tmp/qwen3"
rm -rf "$tmp/qwen"
expect "mkmodel unknown preset" 1 "unknown preset 'gpt-9'; presets: tiny" \
    -- "$snug" mkmodel --preset gpt-9 --dtype bf16 "$tmp/x"
expect "mkmodel no dtype" 2 "no --dtype given" -- "$snug" mkmodel --preset tiny "$tmp/x"
expect "mkmodel same seed" 0 "" -- "$snug" mkmodel --preset tiny --dtype f16 --seed 9 "$tmp/s1"
"$snug" mkmodel --preset tiny --dtype f16 --seed 9 --threads 1 "$tmp/s2" 2>/dev/null
if cmp -s "$tmp/s1/model.safetensors" "$tmp/s2/model.safetensors"; then ok "mkmodel reproducible"; else fail "mkmodel reproducible"; fi

# mkmodel writes the preset family's tokenizer and chat template: the model runs as written
if cmp -s "$tmp/s1/tokenizer.json" models/stories260K/tokenizer.json &&
    cmp -s "$tmp/s1/tokenizer_config.json" models/stories260K/tokenizer_config.json; then
    ok "mkmodel tiny: stories260K's tokenizer"
else
    fail "mkmodel tiny: stories260K's tokenizer" "$(ls "$tmp/s1")"
fi
expect "mkmodel tiny: chat template" 0 "User: And 3+3?" \
    -- "$snug" chat-template "$tmp/s1" --messages tests/data/chat/messages.json --generation-prompt
# (--ignore-eos: with the time as the seed, 1 run in 100 drew the end of text within 3 tokens)
expect "mkmodel tiny: generate" 0 "finish: max_tokens" -- "$snug" generate "$tmp/s1" -p hi -n 3 --ignore-eos
l32=(--preset llama-3.2-1b --dtype bf16 --layers 1 --hidden 64 --intermediate 128 --heads 4 --kv-heads 2)
# run from elsewhere: the tokenizer is found beside the program, as the bundled model is
expect "mkmodel llama-3.2-1b (small) from another directory" 0 "copied the tokenizer" \
    -- env -C "$tmp" "$PWD/$snug" mkmodel "${l32[@]}" "$tmp/l32"
if [[ -f "$tmp/l32/tokenizer.model" && -f "$tmp/l32/tokenizer_config.json" ]]; then
    ok "mkmodel llama-3.2-1b: tokenizer.model and tokenizer_config.json"
else
    fail "mkmodel llama-3.2-1b: tokenizer.model and tokenizer_config.json" "$(ls "$tmp/l32")"
fi
check_json "mkmodel llama-3.2-1b: vocab_size, the tokenizer's 128000 + 256 special" "$tmp/l32/config.json" .vocab_size 128256
expect "mkmodel llama-3.2-1b: the tokenizer's last id is the model's last" 0 "<|reserved_special_token_245|>" \
    -- "$snug" detokenize "$tmp/l32" 128255
expect "mkmodel llama-3.2-1b: the tokenizer has no id past the model's" 1 "token id 128256 is not in the vocabulary" \
    -- "$snug" detokenize "$tmp/l32" 128256
expect "mkmodel llama-3.2-1b: Llama 3 chat template" 0 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>" \
    -- "$snug" chat-template "$tmp/l32" --messages tests/data/chat/messages.json --generation-prompt
expect "mkmodel llama-3.2-1b: generate" 0 "finish: max_tokens" -- "$snug" generate "$tmp/l32" -p hi -n 3 --ignore-eos
expect "mkmodel llama-3.2-1b: generate --chat" 0 "finish: max_tokens" -- "$snug" generate "$tmp/l32" --chat -p hi -n 3 --ignore-eos
rm -rf "$tmp/l32"
# a program away from the repository: a warning, and the model without a tokenizer
mkdir "$tmp/away"
cp "$snug" "$tmp/away/"
expect "mkmodel with no repository: a warning" 0 "warning: models/stories260K not found here or beside the program" \
    -- env -C "$tmp/away" "$tmp/away/snug" mkmodel --preset tiny --dtype f32 "$tmp/away/m"
if [[ -f "$tmp/away/m/model.safetensors" && ! -e "$tmp/away/m/tokenizer.json" ]]; then
    ok "mkmodel with no repository: the weights, no tokenizer"
else
    fail "mkmodel with no repository: the weights, no tokenizer" "$(ls "$tmp/away/m")"
fi
rm -rf "$tmp/away"
expect "mkmodel --tokenizer larger than the vocabulary" 1 "the tokenizer has 50257 tokens, more than the model's vocab_size 512" \
    -- "$snug" mkmodel --preset tiny --dtype f32 --tokenizer tests/data/tokenizers/gpt2 "$tmp/x"
if [[ ! -e "$tmp/x/model.safetensors" ]]; then ok "mkmodel --tokenizer mismatch writes no weights"; else fail "mkmodel --tokenizer mismatch writes no weights"; fi
expect "mkmodel --tokenizer without one" 1 "no tokenizer found" \
    -- "$snug" mkmodel --preset tiny --dtype f32 --tokenizer tests/data/chat "$tmp/x"
expect "mkmodel --tokenizer DIR" 0 "copied the tokenizer of tests/data/tokenizers/llama2" \
    -- "$snug" mkmodel --preset tinyllama-1.1b --dtype bf16 --layers 1 --hidden 64 --intermediate 128 --heads 4 --kv-heads 2 \
    --tokenizer tests/data/tokenizers/llama2 "$tmp/tl"
expect "mkmodel --tokenizer DIR: its tokenizer" 0 "1 15043 3186" -- "$snug" tokenize "$tmp/tl" "Hello world"
rm -rf "$tmp/tl"

# load
"$snug" load models/stories260K --json >"$tmp/l.json"
check_json "load weight bytes = inspect" "$tmp/l.json" '.weight_bytes' 1040128
check_json "load reads exactly the weights" "$tmp/l.json" '.bytes_read' 1040128
check_json "load json keys" "$tmp/l.json" \
    '[has("rank"), has("weight_bytes"), has("load_peak_bytes"), has("staging_bytes"), has("hwm_growth_bytes"), has("bytes_read"), has("seconds")]' \
    '[true,true,true,true,true,true,true]'
"$snug" load models/stories260K --tp 2 --all-ranks --json --dtype bf16 >"$tmp/l2.json"
check_json "load all ranks" "$tmp/l2.json" '[.rank, .weight_bytes]' '[0,260736]
[1,260736]'
expect "load text table" 0 "load peak (/weights)" -- "$snug" load models/stories260K --tp 4 --rank 3
# staging sized to the conversions: 2 slots of the largest converting read, the f32 embedding
# (vocab 512 x hidden 64 x 4 bytes); none when nothing converts
"$snug" load models/stories260K --dtype bf16 --threads 2 --json >"$tmp/ls.json"
check_json "load staging = 2 threads x the embedding" "$tmp/ls.json" '.staging_bytes' $((2 * 512 * 64 * 4))
check_json "load staging without conversion" "$tmp/l.json" '.staging_bytes' 0
# a GGUF import keeps its norms in f32 (build/bench/mkgguf writes bf16 matrices and f32 norms):
# loaded as bf16 only the 2 x layers + 1 norms convert, so the staging is min(threads, norms)
# slots of round_up(hidden x 4, 64) bytes, not its 64 MiB cap (peak / weights is no test at this
# size: the load's own bookkeeping is 4% of its 520 KB; bench/load checks it at 1B)
expect "mkgguf tiny" 0 "11 f32 norms (2816 bytes)" -- "$build/bench/mkgguf" "$tmp/tiny.gguf" --preset tiny --seed 7
expect "convert mkgguf's tiny" 0 "converted" -- "$snug" convert gguf "$tmp/tiny.gguf" "$tmp/tg"
"$snug" inspect "$tmp/tg" --dtype bf16 --json >"$tmp/tgi.json"
hidden=$(json_get "$tmp/tgi.json" .config.hidden_size)
n_norms=$((2 * $(json_get "$tmp/tgi.json" .config.num_hidden_layers) + 1))
check_json "gguf import keeps the norms f32" "$tmp/tgi.json" .bytes_by_dtype.F32 $((n_norms * hidden * 4))
for threads in 2 16; do
    "$snug" load "$tmp/tg" --dtype bf16 --threads $threads --json >"$tmp/tgl.json"
    slots=$((threads < n_norms ? threads : n_norms))
    check_json "gguf import as bf16, $threads threads: staging = $slots slots of one f32 norm" \
        "$tmp/tgl.json" .staging_bytes $((slots * ((hidden * 4 + 63) / 64 * 64)))
    check_json "gguf import as bf16, $threads threads: weight bytes = inspect" "$tmp/tgl.json" \
        .weight_bytes "$(json_get "$tmp/tgi.json" '.rank_weight_bytes[0]')"
    check_json "gguf import as bf16, $threads threads: reads exactly the file's tensors" \
        "$tmp/tgl.json" .bytes_read "$(json_get "$tmp/tgi.json" .weight_bytes)"
done
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
# a GGUF file is a model as it is: inspect, load, profile it without converting
expect "inspect gguf" 0 "parameters: 292,800" -- "$snug" inspect tests/data/stories260K/stories260K.gguf
expect "load gguf" 0 "1,171,200" -- "$snug" load tests/data/stories260K/stories260K.gguf
expect "a file that is not GGUF is no model" 1 "not a GGUF file" -- "$snug" generate tests/data/stories260K/stories260K.bin -n 1
# a llama.cpp Q4_K_M file (tests/data/quant): its types, bits per weight and bytes per rank (the
# block formats held as they are: the file's tensor bytes), its vocabulary as llama.cpp's ids
q4km=tests/data/quant/q7-Q4_K_M.gguf
expect "inspect Q4_K_M: types" 0 "F32 9,216 Q4_K 1,585,152 Q6_K 483,840" -- "$snug" inspect "$q4km"
expect "inspect Q4_K_M: bits per weight" 0 "4.88 bits per weight" -- "$snug" inspect "$q4km"
expect "inspect Q4_K_M: held at the file's size" 0 "  0                 2,078,208" -- "$snug" inspect "$q4km"
expect "inspect Q4_K_M --tp 2 would cut blocks" 1 "(Q4_K, blocks of 256): tensor parallel 2 gives a rank columns [0, 128) of its 256, which cuts a block" -- "$snug" inspect "$q4km" --tp 2
expect "Q4_K_M tokenizes as llama.cpp does" 0 "1 317 269 368 302 263 377 267 265 282 295 433" -- "$snug" tokenize "$q4km" "Lily and Ben went to the park"
expect "Q4_K_M loads at the file's size and inspect's prediction" 0 "  0           2,078,208" -- "$snug" load "$q4km"
# quantized files load as they are, a fused matrix of two formats (Q4_K_M's Q6_K v_proj beside
# Q4_K q/k) in a part per format (tests/data/quant/greedy.txt: llama.cpp's greedy ids up to its
# first small margin), at tp 1 here and tp 2 in tests/dist
qfix=tests/data/quant/greedy.txt
for qf in q7-Q4_0.gguf q7-Q4_K_M.gguf; do
    want=$(awk -v f="file = $qf" '$0 == f {g=1} g && /^ids = /{sub(/^ids = /,""); print; exit}' "$qfix")
    prompt=$(awk -v f="file = $qf" '$0 == f {g=1} g && /^prompt = /{sub(/^prompt = /,""); print; exit}' "$qfix")
    n_new=$(( $(wc -w <<<"$want") - $("$snug" tokenize "tests/data/quant/$qf" "$prompt" | wc -w) ))
    got=$("$snug" generate "tests/data/quant/$qf" -p "$prompt" -n "$n_new" --temperature 0 --ids 2>"$tmp/err")
    if [[ "$got" == "$want" ]]; then ok "$qf: llama.cpp's greedy ids"; else fail "$qf: llama.cpp's greedy ids" "got:  $got" "want: $want" "$(cat "$tmp/err")"; fi
done
# 8-bit KV caches (--kv-cache-dtype q8_0, fp8_e4m3, fp8_e5m2): llama.cpp's greedy ids on the Q4_K_M
# file still, the plan saying how many more tokens they hold; a model whose head_dim (the bundled
# model's 8) is not whole blocks of 32 is refused, naming it
qf=q7-Q4_K_M.gguf
want=$(awk -v f="file = $qf" '$0 == f {g=1} g && /^ids = /{sub(/^ids = /,""); print; exit}' "$qfix")
prompt=$(awk -v f="file = $qf" '$0 == f {g=1} g && /^prompt = /{sub(/^prompt = /,""); print; exit}' "$qfix")
n_new=$(( $(wc -w <<<"$want") - $("$snug" tokenize "tests/data/quant/$qf" "$prompt" | wc -w) ))
for kvd in q8_0 fp8_e4m3 fp8_e5m2; do
    got=$("$snug" generate "tests/data/quant/$qf" -p "$prompt" -n "$n_new" --temperature 0 --ids --kv-cache-dtype $kvd 2>"$tmp/err")
    if [[ "$got" == "$want" ]]; then ok "$qf, $kvd KV cache: llama.cpp's greedy ids"; else fail "$qf, $kvd KV cache: llama.cpp's greedy ids" "got:  $got" "want: $want" "$(cat "$tmp/err")"; fi
done
expect "profile --kv-cache-dtype q8_0: tokens against bf16's" 0 "dtype q8_0: 1.88x the tokens of bf16 a byte" \
    -- "$snug" profile "tests/data/quant/$qf" --memory 128MiB --kv-cache-dtype q8_0
expect "profile --kv-cache-dtype fp8: tokens against bf16's" 0 "dtype fp8_e4m3: 1.94x the tokens of bf16 a byte" \
    -- "$snug" profile "tests/data/quant/$qf" --memory 128MiB --kv-cache-dtype fp8
expect "--kv-cache-dtype q8_0 refused for head_dim 8" 1 "expected a head_dim that is a multiple of its blocks of 32, the model's is 8" \
    -- "$snug" generate -p "Once" -n 2 --kv-cache-dtype q8_0
expect "--kv-cache-dtype fp8_e5m2 refused for head_dim 8" 1 "kv cache dtype fp8_e5m2: expected a head_dim" \
    -- "$snug" generate -p "Once" -n 2 --kv-cache-dtype fp8_e5m2
expect "--kv-cache-dtype names what it takes" 2 "expects auto (bf16), bf16, f16, f32, q8_0, fp8 (fp8_e4m3) or fp8_e5m2, got 'q4_0'" \
    -- "$snug" generate -p "Once" -n 2 --kv-cache-dtype q4_0
# speculative decoding: llama.cpp's greedy ids on the Q4_K_M file still with prompt lookup (its
# prompt repeats nothing: no drafts), with itself as the draft model (every draft kept) and with the
# Q4_0 file (the same vocabulary) as the draft (drafts forced by --draft-min: a draft as large as the
# model never pays, and the measured cost would stop them); the plan counts the draft; refusals
# name what is wrong
for how in "--prompt-lookup" "--draft-model tests/data/quant/$qf --draft-min 4" \
    "--draft-model tests/data/quant/q7-Q4_0.gguf --draft-min 2"; do
    # shellcheck disable=SC2086 # the option and its value, split on purpose
    got=$("$snug" generate "tests/data/quant/$qf" -p "$prompt" -n "$n_new" --temperature 0 --ids $how 2>"$tmp/err")
    if [[ "$got" == "$want" ]] && { [[ $how == --prompt-lookup ]] || grep -q '^speculative: .* [1-9][0-9]* drafted' "$tmp/err"; }; then
        ok "$qf, $how: llama.cpp's greedy ids, drafts verified"
    else
        fail "$qf, $how: llama.cpp's greedy ids" "got:  $got" "want: $want" "$(cat "$tmp/err")"
    fi
done
"$snug" generate "tests/data/quant/$qf" -p "$prompt" -n "$n_new" --temperature 0 --draft-model "tests/data/quant/$qf" \
    --draft-min 4 >/dev/null 2>"$tmp/err"
if grep -qE '^speculative: draft model, .* ([0-9]+) drafted, \1 accepted \(1\.000\)' "$tmp/err"; then
    ok "the model as its own draft: every draft kept"
else
    fail "the model as its own draft: every draft kept" "$(grep speculative "$tmp/err")"
fi
expect "profile --draft-model: the draft in the plan" 0 "draft model: 4 layers" \
    -- "$snug" profile "tests/data/quant/$qf" --memory 128MiB --draft-model tests/data/quant/q7-Q4_0.gguf
"$snug" mkmodel --preset qwen2-0.5b --layers 1 --hidden 64 --heads 2 --kv-heads 1 --intermediate 64 --dtype bf16 \
    "$tmp/qdraft" >/dev/null 2>&1
expect "--draft-model with another vocabulary refused" 1 "its tokenizer (151646 tokens) is not the model's (512 tokens)" \
    -- "$snug" generate -p "Once" -n 2 --draft-model "$tmp/qdraft"
rm -rf "$tmp/qdraft"
expect "--draft-model that is no model" 1 "--draft-model: /nonexistent/config.json: cannot open" \
    -- "$snug" generate -p "Once" -n 2 --draft-model /nonexistent
expect "one drafter" 1 "--prompt-lookup and --draft-model: give one drafter" \
    -- "$snug" generate -p "Once" -n 2 --prompt-lookup --draft-model models/stories260K
expect "--draft-min over the most" 1 "draft_min: expected 0 to num_speculative_tokens (4), got 6" \
    -- "$snug" generate -p "Once" -n 2 --prompt-lookup --draft-min 6
expect "--num-speculative-tokens out of range" 2 "--num-speculative-tokens expects 1 to 16, got '17'" \
    -- "$snug" generate -p "Once" -n 2 --prompt-lookup --num-speculative-tokens 17
# the other families as llama.cpp writes them (tests/data/arch, Q8_0): what the family table says
# of each, and llama.cpp's 24 greedy ids for Qwen2 and Qwen3 (every margin 0.6 or more)
expect "inspect phi3 GGUF: fused, partial rotary" 0 "fused qkv gate_up, rope on 48 of 64 dimensions" -- "$snug" inspect tests/data/arch/f7-phi3-Q8_0.gguf
expect "inspect qwen3 GGUF: q/k norms, head_dim 128" 0 "head_dim 128" -- "$snug" inspect tests/data/arch/f7-qwen3-Q8_0.gguf
expect "inspect qwen2 GGUF: biases, tied" 0 "tied embeddings yes, q/k/v bias yes" -- "$snug" inspect tests/data/arch/f7-qwen2-Q8_0.gguf
expect "inspect gemma3 GGUF: windows, sandwich norms" 0 "sliding window 8 on 5 of 6 layers (rope theta 10000 there, unscaled)" -- "$snug" inspect tests/data/arch/f7-gemma3-Q8_0.gguf
# its windowed layers keep only their windows (a cache group of their own) when the window is shorter
# than max_model_len: the plan says so, and the ids are those of one cache of every layer (--swa-full)
gf=tests/data/arch/f7-gemma3-Q8_0.gguf
expect "profile gemma3: windowed layers' own cache" 0 "windowed layers: 5 keep only their window of 8 tokens" \
    -- "$snug" profile "$gf" --memory 64MiB --max-model-len 256 --max-num-seqs 4
gw=$("$snug" generate "$gf" -p "One day, a little bird flew over the" -n 40 --temperature 0 --ids --max-model-len 128 2>"$tmp/err")
gs=$("$snug" generate "$gf" -p "One day, a little bird flew over the" -n 40 --temperature 0 --ids --swa-full 2>>"$tmp/err")
if [[ -n $gw && $gw == "$gs" ]]; then ok "gemma3: windows in their own cache give --swa-full's ids ($(wc -w <<<"$gw"))"
else fail "gemma3: windows in their own cache give --swa-full's ids" "window group: $gw" "swa-full:     $gs" "$(cat "$tmp/err")"; fi
afix=tests/data/arch/greedy.txt
for fam in qwen2 qwen3; do
    ids() { awk -v f="file = f7-$fam-Q8_0.gguf" -v k="$1 = " '$0 == f {g=1} g && index($0, k) == 1 {sub(k, ""); print; exit}' "$afix"; }
    want="$(ids prompt_ids) $(ids greedy)"
    got=$("$snug" generate "tests/data/arch/f7-$fam-Q8_0.gguf" -p "$(ids prompt)" -n 24 --temperature 0 --ids 2>"$tmp/err")
    if [[ "$got" == "$want" ]]; then ok "f7-$fam-Q8_0.gguf: llama.cpp's greedy ids"; else fail "f7-$fam-Q8_0.gguf: llama.cpp's greedy ids" "got:  $got" "want: $want" "$(cat "$tmp/err")"; fi
done
# the families' presets write what their Hugging Face checkpoints hold (Phi-3: qkv_proj and
# gate_up_proj, split per rank as q, k, v rows and as the two halves)
"$snug" mkmodel --preset phi-3-mini --dtype bf16 --layers 1 --hidden 128 --intermediate 256 --heads 4 --kv-heads 2 \
    "$tmp/phi3" >/dev/null 2>&1
expect "phi-3-mini preset: fused tensors" 0 "model.layers.0.self_attn.qkv_proj.weight" -- "$snug" inspect "$tmp/phi3" --tensors
expect "phi-3-mini preset: bytes per rank at tp 2" 0 "  1                 8,356,608" -- "$snug" inspect "$tmp/phi3" --tp 2
expect "phi-3-mini preset: generates" 0 "finish: max_tokens" -- "$snug" generate "$tmp/phi3" -p "Hello" -n 4 --temperature 0
expect "convert to-gguf" 0 "converted" -- "$snug" convert to-gguf "$tmp/phi3" "$tmp/phi3.gguf"
expect "to-gguf: the same model as GGUF" 0 "fused qkv gate_up" -- "$snug" inspect "$tmp/phi3.gguf"
expect "to-gguf: the same bytes per rank" 0 "  1                 8,356,608" -- "$snug" inspect "$tmp/phi3.gguf" --tp 2
expect "to-gguf of a GGUF file" 1 "already a GGUF file" -- "$snug" convert to-gguf "$tmp/phi3.gguf" "$tmp/x.gguf"
expect "to-gguf and back: converts" 0 "converted" -- "$snug" convert gguf "$tmp/phi3.gguf" "$tmp/phi3-back"
if cmp -s "$tmp/phi3/model.safetensors" "$tmp/phi3-back/model.safetensors"; then ok "to-gguf and back: the same bytes (Phi-3's fused tensors)"; else fail "to-gguf and back: the same bytes"; fi
# to-gguf writes the directory's tokenizer as llama.cpp's tokenizer.ggml.* keys: the file alone
# generates what the directory does
expect "to-gguf: with the vocabulary" 0 "with its vocabulary" -- "$snug" convert to-gguf models/stories260K "$tmp/s260k.gguf"
want=$("$snug" generate models/stories260K -p "Once upon a time" -n 16 --temperature 0 --ids 2>/dev/null)
got=$("$snug" generate "$tmp/s260k.gguf" -p "Once upon a time" -n 16 --temperature 0 --ids 2>"$tmp/err")
if [[ -n "$want" && "$got" == "$want" ]]; then ok "to-gguf: the GGUF file alone gives the directory's ids"; else fail "to-gguf: the GGUF file alone gives the directory's ids" "got:  $got" "want: $want" "$(cat "$tmp/err")"; fi
expect "convert usage" 2 "unknown format 'onnx'" -- "$snug" convert onnx a b
# Llama 3.1's rope scaling as a GGUF file holds it (rope_freqs.weight, one factor per rotary
# frequency, as llama.cpp's converter computes them): read into the config, not a weight
build/bench/mkgguf "$tmp/rope.gguf" --preset tiny --llama3-rope 4,1,4,64 >/dev/null
got=$("$snug" inspect "$tmp/rope.gguf" --json | jq -c '[.config.rope_freq_factors[] | . * 1000 | round]')
if [[ $got == "[1000,3927,4000,4000]" ]]; then ok "GGUF rope_freqs.weight: the factors"; else fail "GGUF rope_freqs.weight: the factors" "got $got"; fi
expect "GGUF rope_freqs.weight: loads" 0 "  0" -- "$snug" load "$tmp/rope.gguf"
expect "GGUF rope_freqs.weight: no config.json form" 1 "tensor 'rope_freqs.weight' (per-frequency rotary factors" -- "$snug" convert gguf "$tmp/rope.gguf" "$tmp/rope-hf"
# quantize on load: inspect predicts the bytes each rank holds, load holds exactly them (Q8_0 blocks
# of 34 bytes per 32; down_proj's 172 columns stay float), --tp 2 quantizes each rank's slices
expect "inspect --dtype q8_0 predicts" 0 "  0                   440,032" -- "$snug" inspect models/stories260K --dtype q8_0
expect "load --dtype q8_0 holds that" 0 "  0             440,032" -- "$snug" load models/stories260K --dtype q8_0
expect "inspect --dtype q8_0 --tp 2" 0 "  1                   221,424" -- "$snug" inspect models/stories260K --dtype q8_0 --tp 2
expect "load --dtype q8_0 --tp 2" 0 "  1             221,424" -- "$snug" load models/stories260K --dtype q8_0 --tp 2 --all-ranks
expect "--dtype q4_k falls back to Q5_0 for 64 columns" 0 "  0                   363,424" -- "$snug" inspect models/stories260K --dtype q4_k
expect "--dtype of a format snug does not write" 2 "--dtype expects bf16|f16|f32|q8_0|q4_0|q4_k|q5_k|q6_k, got 'q3_k'" -- "$snug" load models/stories260K --dtype q3_k
expect "generate --dtype q4_0" 0 "Once upon a time" -- "$snug" generate models/stories260K --dtype q4_0 -p "Once upon a time" -n 8 --temperature 0

# tokenizers: the bundled model's tokenizer against the llama2.c reference's
# ids and text (tests/data/stories260K/greedy.txt)
greedy=tests/data/stories260K/greedy.txt
for n in 1 2; do
    prompt=$(grep '^prompt = ' "$greedy" | sed -n "${n}p" | sed "s/^prompt = '\(.*\)'$/\1/")
    want=$(grep '^prompt_ids = ' "$greedy" | sed -n "${n}p" | sed 's/^prompt_ids = //')
    got=$("$snug" tokenize models/stories260K "$prompt" 2>&1)
    if [[ "$got" == "$want" ]]; then ok "stories260K prompt $n ids"; else fail "stories260K prompt $n ids" "got $got" "want $want"; fi
    # the ids after BOS decode to the text run.c printed
    ids=$(grep '^ids = ' "$greedy" | sed -n "${n}p" | sed 's/^ids = 1 //')
    awk -v n="$n" '/^text <<END$/ { c++; if (c == n) { p = 1; next } } /^END$/ { p = 0 } p' "$greedy" >"$tmp/want$n.txt"
    # shellcheck disable=SC2086
    "$snug" detokenize models/stories260K $ids >"$tmp/got$n.txt" 2>&1
    if cmp -s "$tmp/got$n.txt" "$tmp/want$n.txt"; then ok "stories260K text $n"; else fail "stories260K text $n" "$(head -c 300 "$tmp/got$n.txt")"; fi
done
printf 'Once upon a time' >"$tmp/prompt.txt"
expect "tokenize --file" 0 "1 403 407 261 378" -- "$snug" tokenize models/stories260K --file "$tmp/prompt.txt"
expect "tokenize --no-bos" 0 "403 407 261 378" -- "$snug" tokenize models/stories260K --no-bos "Once upon a time"
expect "tokenize gpt2" 0 "15496 995" -- "$snug" tokenize tests/data/tokenizers/gpt2 "Hello world"
expect "tokenize llama3 tiktoken" 0 "128000 9906 1917" -- "$snug" tokenize tests/data/tokenizers/llama3-tiktoken/tokenizer.model "Hello world"
expect "tokenize --special" 0 "1 3 16127 29473 4" -- "$snug" tokenize tests/data/tokenizers/mistral-v0.3 --special "[INST] Hi [/INST]"
expect "special text is plain text by default" 0 "1 1501 17057 29561 16127" -- "$snug" tokenize tests/data/tokenizers/mistral-v0.3 "[INST] Hi [/INST]"
expect "detokenize gpt2" 0 "Hello world" -- "$snug" detokenize tests/data/tokenizers/gpt2 15496 995
expect "detokenize --skip-special" 0 "Once upon a time" -- "$snug" detokenize models/stories260K --skip-special 1 403 407 261 378
expect "detokenize id out of range" 1 "token id 99999 is not in the vocabulary" -- "$snug" detokenize tests/data/tokenizers/gpt2 99999
expect "tokenize missing path" 1 "/nonexistent: no such tokenizer file or model directory" -- "$snug" tokenize /nonexistent x
expect "tokenize usage" 2 "usage: snug tokenize" -- "$snug" tokenize
expect "convert tokenizer" 0 "converted" -- "$snug" convert tokenizer tests/data/stories260K/tok512.bin "$tmp/tk"
# (the bundled tokenizer_config.json is the converter's plus one line: its chat template)
if cmp -s "$tmp/tk/tokenizer.json" models/stories260K/tokenizer.json &&
    grep -v '^  "chat_template": ' models/stories260K/tokenizer_config.json | cmp -s "$tmp/tk/tokenizer_config.json" -; then
    ok "bundled tokenizer is the converter's output"
else
    fail "bundled tokenizer is the converter's output"
fi
expect "convert llama2c --tokenizer" 0 "converted" -- "$snug" convert llama2c tests/data/stories260K/stories260K.bin "$tmp/bt" --tokenizer tests/data/stories260K/tok512.bin
expect "converted model tokenizes" 0 "1 403 407 261 378" -- "$snug" tokenize "$tmp/bt" "Once upon a time"
expect "convert gguf writes its vocabulary" 0 "1 403 407 261 378" -- "$snug" tokenize "$tmp/g" "Once upon a time"

# generate: greedy decoding reproduces llama2.c's run.c (tests/data/stories260K/greedy.txt: every
# id, and the printed text) from the bundled model, from both imports and from the GGUF file as it is
# (its q and k rows in llama.cpp's interleaved rotary order)
fixture=tests/data/stories260K/greedy.txt
n_cases=$(grep -c '^\[case\]' "$fixture")
for k in $(seq 1 "$n_cases"); do
    prompt=$(awk -v k="$k" '/^\[case\]/{c++} c==k && /^prompt = /{sub(/^prompt = \047/,""); sub(/\047$/,""); print}' "$fixture")
    want=$(awk -v k="$k" '/^\[case\]/{c++} c==k && /^ids = /{sub(/^ids = /,""); print}' "$fixture")
    n_prompt=$(awk -v k="$k" '/^\[case\]/{c++} c==k && /^prompt_ids = /{print NF-2}' "$fixture")
    n_new=$(( $(wc -w <<<"$want") - n_prompt ))
    awk -v k="$k" '/^\[case\]/{c++} c==k && /^text <<END/{t=1; next} t && /^END$/{t=0} c==k && t' "$fixture" >"$tmp/want-text"
    for m in models/stories260K "$tmp/bt" "$tmp/g" tests/data/stories260K/stories260K.gguf; do
        got=$("$snug" generate "$m" -p "$prompt" -n "$n_new" --temperature 0 --ids 2>"$tmp/err")
        if [[ "$got" == "$want" ]]; then ok "generate greedy ids, case $k, $m"; else fail "generate greedy ids, case $k, $m" "got:  ${got:0:300}" "want: ${want:0:300}" "$(cat "$tmp/err")"; fi
    done
    "$snug" generate -p "$prompt" -n "$n_new" --temperature 0 >"$tmp/got-text" 2>"$tmp/err"
    if cmp -s "$tmp/got-text" "$tmp/want-text"; then ok "generate greedy text, case $k"; else fail "generate greedy text, case $k" "$(diff "$tmp/got-text" "$tmp/want-text" | head -5)"; fi
done
expect "generate reports speeds" 0 "tokens/s" -- "$snug" generate -n 8
a=$("$snug" generate -n 40 --seed 5 2>/dev/null); b=$("$snug" generate -n 40 --seed 5 2>/dev/null); c=$("$snug" generate -n 40 --seed 6 2>/dev/null)
if [[ "$a" == "$b" && "$a" != "$c" ]]; then ok "generate seed: same seed same text, another seed another"; else fail "generate seed" "$a" "$b" "$c"; fi
n=$("$snug" generate -n 17 --seed 1 --ids 2>/dev/null | wc -w)
if [[ $n -eq 18 ]]; then ok "generate -n counts new tokens"; else fail "generate -n counts new tokens" "$n ids"; fi
out=$("$snug" generate -p "Once upon a time" -n 60 --temperature 0 --stop "Lily" 2>&1)
if [[ "$out" == "Once upon a time, there was a little girl named "$'\n'*"finish: stop_string"* ]]; then ok "generate --stop"; else fail "generate --stop" "$out"; fi
# --json-schema / --grammar-file: the output (after the prompt) keeps to them, ended by the grammar
schema='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}}, "required": ["name", "age"]}'
for seed in 1 2 3; do
    out=$("$snug" generate -p "Once upon a time" --seed "$seed" --json-schema "$schema" 2>"$tmp/err")
    if jq -e '(keys == ["age", "name"]) and (.age | type == "number" and floor == .) and (.name | length <= 10)' \
            <<<"${out#Once upon a time}" >/dev/null 2>&1 && grep -q "finish: grammar" "$tmp/err"; then
        ok "generate --json-schema, seed $seed: the output validates"
    else
        fail "generate --json-schema, seed $seed" "$out" "$(tail -1 "$tmp/err")"
    fi
done
printf 'root ::= ("yes" | "no") "." # an answer\n' >"$tmp/yn.gbnf"
out=$("$snug" generate -p "Is it raining?" --seed 4 --grammar-file "$tmp/yn.gbnf" 2>"$tmp/err")
if [[ $out =~ ^"Is it raining?"(yes|no)\.$ ]] && grep -q "finish: grammar" "$tmp/err"; then ok "generate --grammar-file"
else fail "generate --grammar-file" "$out" "$(tail -1 "$tmp/err")"; fi
expect "generate --json-schema with a keyword not taken" 1 'the keyword "pattern" is not supported' -- \
    "$snug" generate -p x --json-schema '{"type": "string", "pattern": "^a"}'
printf 'root ::= [a-\n' >"$tmp/bad.gbnf"
expect "generate --grammar-file that does not compile" 1 "bad.gbnf: line 1" -- "$snug" generate -p x --grammar-file "$tmp/bad.gbnf"
# 60,000 nested groups overflowed the parser's stack (exit 139): a clear error now
{ printf 'root ::= '; printf '%.0s(' $(seq 60000); printf '"a"'; printf '%.0s)' $(seq 60000); } >"$tmp/deep.gbnf"
expect "generate --grammar-file nested 60,000 deep" 1 "groups nested more than 128 deep" -- \
    "$snug" generate -p x --grammar-file "$tmp/deep.gbnf"
# a grammar whose start a sequence's matcher cannot hold: refused before it runs, as the server
# refuses it (it ended in finish grammar_failed at the first token)
{ printf 'root ::= a0\n'; for i in $(seq 0 69); do printf 'a%d ::= a%d "x"\n' "$i" $((i + 1)); done
  printf 'a70 ::= "y"\n'; } >"$tmp/deepstart.gbnf"
expect "generate --grammar-file whose start is too deep" 1 "its start is too ambiguous or too deep" -- \
    "$snug" generate -p x --grammar-file "$tmp/deepstart.gbnf"
expect "generate kv cache dtypes agree" 0 "$(head -c 60 "$tmp/want-text")" -- "$snug" generate -p "Once upon a time" -n 20 --temperature 0 --kv-cache-dtype f16
expect "generate scalar kernels" 0 "$(head -c 60 "$tmp/want-text")" -- "$snug" generate -p "Once upon a time" -n 20 --temperature 0 --isa scalar
expect "generate --bf16-matmul fma" 0 "$(head -c 60 "$tmp/want-text")" -- "$snug" generate -p "Once upon a time" -n 20 --temperature 0 --bf16-matmul fma
expect "generate --bf16-matmul bad" 2 "--bf16-matmul expects auto, fma or vdpbf16ps, got 'x'" -- "$snug" generate --bf16-matmul x
expect "generate --bf16-matmul vdpbf16ps on scalar kernels" 1 "the scalar kernels cannot run bf16 weights on vdpbf16ps zmm" -- "$snug" generate -n 2 --isa scalar --bf16-matmul vdpbf16ps
# the AVX2-only path on any machine that has AVX2, by flag and by environment (a machine
# without it gets the error that says so)
if grep -qw avx2 /proc/cpuinfo; then
    expect "generate avx2 kernels" 0 "$(head -c 60 "$tmp/want-text")" -- "$snug" generate -p "Once upon a time" -n 20 --temperature 0 --isa avx2
    expect "generate SNUG_ISA=avx2" 0 "$(head -c 60 "$tmp/want-text")" -- env SNUG_ISA=avx2 "$snug" generate -p "Once upon a time" -n 20 --temperature 0
fi
expect "generate model length" 0 "finish: model_length" -- "$snug" generate -n 1000 --max-model-len 20
expect "generate --max-model-len beyond the model" 1 "--max-model-len 600 is more than the model's 512 positions" -- "$snug" generate --max-model-len 600
expect "generate bad temperature" 2 "--temperature expects a number >= 0, got '-1'" -- "$snug" generate --temperature -1
expect "generate bad top-p" 2 "--top-p expects a number in (0, 1], got '0'" -- "$snug" generate --top-p 0
# the bundled model less its chat template
mkdir "$tmp/notpl"
cp models/stories260K/config.json models/stories260K/model.safetensors models/stories260K/tokenizer.json "$tmp/notpl/"
grep -v '^  "chat_template": ' models/stories260K/tokenizer_config.json >"$tmp/notpl/tokenizer_config.json"
expect "generate no chat template" 1 "the model has no chat template" -- "$snug" generate "$tmp/notpl" --chat -p hi
expect "generate --chat with the bundled model's template" 0 "finish: max_tokens" -- "$snug" generate --chat -p hi -n 3 --ignore-eos
expect "generate missing model" 1 "/nonexistent" -- "$snug" generate /nonexistent -p hi
expect "generate usage" 2 "usage: snug generate" -- "$snug" generate --frobnicate
"$snug" mkmodel --preset tiny --dtype f32 --no-tokenizer "$tmp/notok" >/dev/null 2>&1
expect "generate without a tokenizer" 1 "$tmp/notok: no tokenizer found" -- "$snug" generate "$tmp/notok" -p hi

# generate plans with the options serve and profile take: the budget honoured and told in the
# plan's line (on stderr, the text alone on stdout), a budget too small refused with the
# plan's message, --kv-cache-memory reaching it, and the plan's checks saying the same as serve's
"$snug" generate --memory 2GiB -p "Once upon a time" -n 8 --temperature 0 >"$tmp/gm.out" 2>"$tmp/gm.err"
gm_rc=$?
"$snug" profile --memory 2GiB --max-model-len 512 --quiet >"$tmp/pm.out" 2>&1
if [[ $gm_rc == 0 ]] && grep -q '^memory plan: budget 2.00 GiB = weights ' "$tmp/gm.err" &&
    grep -q '^memory plan: budget 2.00 GiB = weights ' "$tmp/pm.out" &&
    [[ $(head -c 16 "$tmp/gm.out") == "Once upon a time" ]] && ! grep -q 'memory plan' "$tmp/gm.out"; then
    ok "generate --memory 2GiB: 'memory plan: budget 2.00 GiB' on stderr, as profile says it"
else
    fail "generate --memory 2GiB" "exit $gm_rc" "$(cat "$tmp/gm.err")" "stdout: $(head -c 200 "$tmp/gm.out")"
fi
expect "generate --memory too small: the plan's message" 1 \
    "before loading: the budget of 1.00 MiB (1,048,576 bytes) is smaller than weights" -- "$snug" generate --memory 1MiB -n 2
expect "generate --kv-cache-memory reaches the plan" 1 "--kv-cache-memory leaves no KV cache block of 10.00 KiB" \
    -- "$snug" generate --kv-cache-memory 1KiB -n 2
expect "generate --memory and --memory-fraction" 2 "--memory and --memory-fraction: give one" \
    -- "$snug" generate --memory 1GiB --memory-fraction 0.5
for c in generate serve profile; do
    expect "$c --threads 0" 2 "snug: --threads expects 1 to 1024, got '0'" -- "$snug" "$c" --threads 0
done
expect "load --threads 0" 2 "snug: --threads expects 1 to 1024, got '0'" -- "$snug" load models/stories260K --threads 0
expect "generate --max-model-len 1" 2 "--max-model-len expects an integer >= 2, got '1'" -- "$snug" generate --max-model-len 1
expect "generate --help lists the plan options" 0 "[--memory BYTES | --memory-fraction F] [--kv-cache-memory BYTES]" \
    -- "$snug" generate --help

# serve with no model runs the bundled one from any directory (found beside the program, as
# generate finds it): started in $tmp on port 0, it answers /health
snug_abs=$(cd "$(dirname "$snug")" && pwd)/snug
(cd "$tmp" && exec "$snug_abs" serve --port 0 --memory 256MiB --max-model-len 256 --threads 1 \
    >"$tmp/away.out" 2>"$tmp/away.err") &
away_pid=$!
away_url=
for ((i = 0; i < 300; i++)); do
    line=$(grep -s -m1 '^serving .* on http://' "$tmp/away.out")
    if [[ $line =~ on\ (http://[0-9.]+:[0-9]+) ]]; then away_url=${BASH_REMATCH[1]}; break; fi
    kill -0 "$away_pid" 2>/dev/null || break
    sleep 0.1
done
away_health=$([[ -n $away_url ]] && curl -s --max-time 5 "$away_url/health")
kill -TERM "$away_pid" 2>/dev/null
wait "$away_pid" 2>/dev/null
if [[ $away_health == *'"status":"ok"'* ]] && grep -q '^serving .*models/stories260K as "stories260K"' "$tmp/away.out"; then
    ok "serve with no model from another directory: the bundled model, /health ok"
else
    fail "serve with no model from another directory" "health '$away_health'" "$(tail -3 "$tmp/away.out")" "$(tail -3 "$tmp/away.err")"
fi

# chat templates: the renderings Jinja made (tests/data/chat)
for m in tinyllama-1.1b-chat smollm2-135m phi-3-mini qwen2.5 mistral-v0.3 gemma-2b-it mistral-v0.3.v0.2-style; do
    msgs=tests/data/chat/messages.json
    [[ $m == gemma-2b-it || $m == mistral-v0.3.v0.2-style ]] && msgs=tests/data/chat/messages-no-system.json
    "$snug" chat-template "tests/data/chat/$m.tokenizer_config.json" --messages "$msgs" --generation-prompt >"$tmp/chat.txt" 2>&1
    if cmp -s "$tmp/chat.txt" "tests/data/chat/$m.rendered.txt"; then ok "chat-template $m"; else fail "chat-template $m" "$(head -c 400 "$tmp/chat.txt")"; fi
done
expect "chat-template from a model directory" 0 "<|assistant|>" -- "$snug" chat-template tests/data/tokenizers/tinyllama-1.1b-chat --messages tests/data/chat/messages.json --generation-prompt
expect "chat-template raise_exception" 1 "chat_template: System role not supported" -- "$snug" chat-template tests/data/chat/gemma-2b-it.tokenizer_config.json --messages tests/data/chat/messages.json
expect "chat-template none" 1 "$tmp/notpl: the model has no chat template" -- "$snug" chat-template "$tmp/notpl" --messages tests/data/chat/messages.json
"$snug" chat-template models/stories260K --messages tests/data/chat/messages.json --generation-prompt >"$tmp/chat.txt" 2>&1
want=$'<s>You are a helpful assistant.\nUser: Hello! What is 2+2?\nAssistant: 4.\nUser: And 3+3?\nAssistant:'
if [[ "$(cat "$tmp/chat.txt")" == "$want" ]]; then ok "chat-template of the bundled model"; else fail "chat-template of the bundled model" "$(head -c 400 "$tmp/chat.txt")"; fi
echo '{"a": 1}' >"$tmp/bad-messages.json"
expect "chat-template bad messages" 1 "expected a list of messages" -- "$snug" chat-template tests/data/chat/qwen2.5.tokenizer_config.json --messages "$tmp/bad-messages.json"
expect "chat-template usage" 2 "usage: snug chat-template" -- "$snug" chat-template models/stories260K
# Qwen3 (enable_thinking through --kwargs, tools and reasoning from an object of messages) and
# Phi-3.5: the renderings Jinja2 made (tests/data/chat/render.py, one per row of renderings.tsv)
while IFS=$'\t' read -r out cfg msgs prompt kwargs; do
    [[ $out == \#* || -z $out ]] && continue
    args=()
    [[ $prompt == 1 ]] && args+=(--generation-prompt)
    [[ $kwargs != - ]] && args+=(--kwargs "$kwargs")
    "$snug" chat-template "tests/data/chat/$cfg.tokenizer_config.json" --messages "tests/data/chat/$msgs" \
        "${args[@]}" >"$tmp/chat.txt" 2>&1
    if cmp -s "$tmp/chat.txt" "tests/data/chat/$out"; then ok "chat-template $out"; else fail "chat-template $out" "$(head -c 400 "$tmp/chat.txt")"; fi
done <tests/data/chat/renderings.tsv
expect "chat-template --kwargs not an object" 1 "--kwargs: expected a JSON object at the top, found an array" \
    -- "$snug" chat-template tests/data/chat/qwen3.tokenizer_config.json --messages tests/data/chat/messages.json --kwargs '[1]'
expect "chat-template --kwargs not JSON" 1 "--kwargs: not valid JSON" \
    -- "$snug" chat-template tests/data/chat/qwen3.tokenizer_config.json --messages tests/data/chat/messages.json --kwargs '{enable_thinking: false}'

# snug profile: the memory plan
# fail fast: weights over the budget are refused before anything is loaded, at once, the
# process's high-water mark far under the budget (a 90 MB model against 40 MiB)
"$snug" mkmodel --preset tiny --dtype f32 --hidden 512 --intermediate 1376 --layers 8 --heads 8 \
    --kv-heads 4 --no-tokenizer "$tmp/m90" >/dev/null 2>&1
t0=$(date +%s%N)
"$snug" profile "$tmp/m90" --memory 40MiB --quiet >"$tmp/fast.out" 2>"$tmp/fast.err"
fast_rc=$? fast_ms=$((($(date +%s%N) - t0) / 1000000))
fast_hwm=$(sed -n 's/.*high-water mark is [^,]*, \([0-9]*\) bytes.*/\1/p' "$tmp/fast.err")
if [[ $fast_rc == 1 && $fast_ms -lt 1000 && -n $fast_hwm && $fast_hwm -lt $((40 << 20)) ]] &&
    grep -q 'before loading: the weights, 89.53 MiB (93,882,368 bytes), are over the budget of 40.00 MiB' "$tmp/fast.err" &&
    ! grep -q 'loaded weights' "$tmp/fast.out"; then
    ok "a budget the weights cannot fit fails before loading, in $fast_ms ms, high-water mark $fast_hwm bytes"
else
    fail "a budget the weights cannot fit fails before loading" "exit $fast_rc in $fast_ms ms, hwm '$fast_hwm'" "$(head -3 "$tmp/fast.err")"
fi

# progress: a line on stderr as each phase begins, in order; none with --quiet or --json
"$snug" profile models/stories260K --memory 64MiB --max-model-len 512 >/dev/null 2>"$tmp/progress.err"
phases=$(sed -n 's/^snug: \[ *[0-9.]* s\] \([a-z]*\).*/\1/p' "$tmp/progress.err" | tr '\n' ' ')
"$snug" profile models/stories260K --memory 64MiB --max-model-len 512 --quiet >/dev/null 2>"$tmp/quiet.err"
if [[ $phases == "load reset profile plan populate ready " && ! -s $tmp/quiet.err ]]; then
    ok "profile: a progress line as each phase begins ($phases), none with --quiet"
else
    fail "profile progress lines" "phases '$phases'" "quiet: $(head -2 "$tmp/quiet.err")"
fi
# the load's bytes and rate at its end; on a terminal a bar as it goes, redrawn in place
if [[ "$(sed -n 2p "$tmp/progress.err")" =~ ^snug:\ loaded\ 1015\.75\ KiB\ in\ [0-9.]+\ s\ \([0-9.]+\ GB/s\)$ ]]; then
    ok "profile: the load's bytes and rate after it"
else
    fail "profile: the load's line" "$(sed -n 2p "$tmp/progress.err")"
fi
if command -v script >/dev/null; then
    script -qc "'$snug' profile models/stories260K --memory 64MiB --max-model-len 512 --staging-bytes 64KiB --threads 1" /dev/null >"$tmp/tty.out" 2>&1
    if grep -aq $'\r\033\[Ksnug: loading \[#*\.*\] [0-9.]* [KM]iB of 1015.75 KiB, [0-9.]* GB/s' "$tmp/tty.out" &&
        grep -aq $'\r\033\[Ksnug: loaded 1015.75 KiB in' "$tmp/tty.out"; then
        ok "profile: on a terminal, a load bar redrawn in place"
    else
        fail "profile: the load bar on a terminal" "$(head -c 400 "$tmp/tty.out" | cat -A)"
    fi
fi
"$snug" profile models/stories260K --memory 64MiB --max-model-len 512 --max-num-seqs 256 --json >"$tmp/plan.json" 2>&1
check_json "profile budget" "$tmp/plan.json" '[.budget_bytes, .budget_source]' '[67108864,"memory flag"]'
check_json "profile limited by the budget" "$tmp/plan.json" '.kv_limited_by' '"budget"'
check_json "profile block bytes" "$tmp/plan.json" '[.block_bytes, .block_size, .kv_cache_dtype]' '[10240,16,"bfloat16"]'
# (the serving state includes the block pool, made for the plan's blocks)
check_json "profile sums to the budget, less than a block over" "$tmp/plan.json" \
    '(.budget_bytes - .weight_bytes - .activation_bytes - (.serving_state_bytes - .block_pool_bytes) - .untracked_bytes - .reserve_bytes) as $k
     | [$k == .kv_left_bytes, .kv_left_bytes - .kv_cache_bytes - .block_pool_bytes == .kv_left_over_bytes,
        .kv_left_over_bytes < .next_block_cost_bytes, .next_block_cost_bytes > 0,
        .kv_cache_bytes >= .kv_blocks * .block_bytes, .kv_tokens == .kv_blocks * 16,
        .max_concurrency == .kv_tokens / 512, .prefix_caching]' '[true,true,true,true,true,true,true,true]'
check_json "profile step at the largest batch" "$tmp/plan.json" '[.max_num_batched_tokens, .profile_seqs]' '[2048,256]'
"$snug" profile models/stories260K --memory 64MiB --max-model-len 512 --max-num-seqs 4 --max-num-batched-tokens 64 --json >"$tmp/plan4.json" 2>&1
check_json "profile limited by max_num_seqs" "$tmp/plan4.json" '[.kv_blocks, .kv_limited_by]' '[128,"max_num_seqs"]'
"$snug" profile models/stories260K --memory 64MiB --max-model-len 512 --kv-cache-memory 1MiB --json >"$tmp/plan-kv.json" 2>&1
check_json "profile --kv-cache-memory" "$tmp/plan-kv.json" '[.kv_blocks, .kv_limited_by]' '[102,"kv_cache_memory"]'
expect "profile text" 0 "limited by budget; max concurrency at 512 tokens" -- "$snug" profile --memory 64MiB --max-model-len 512
expect "profile budget from the machine" 0 "budget: " -- "$snug" profile --memory-fraction 0.5 --max-model-len 64 --max-num-seqs 2 --max-num-batched-tokens 64
expect "profile weights over the budget" 1 "are over the budget of 512.00 KiB (524,288 bytes) by" -- "$snug" profile --memory 512KiB
expect "profile nothing left" 1 "leaving nothing for the KV cache" -- "$snug" profile --memory 12MiB --max-model-len 512
expect "profile kv cache memory too large" 1 "--kv-cache-memory 1.00 GiB (1,073,741,824 bytes) does not fit" -- "$snug" profile --memory 64MiB --max-model-len 512 --kv-cache-memory 1GiB
# the timeline: an SVG with every phase, the budget and the legend; a failed plan still draws
"$snug" profile --memory 64MiB --max-model-len 512 --timeline "$tmp/t.svg" >/dev/null 2>"$tmp/t.err"
if [[ -s $tmp/t.svg ]] && grep -q "memory timeline written to $tmp/t.svg" "$tmp/t.err" &&
    [[ $(head -c 5 "$tmp/t.svg") == "<?xml" && $(tail -n 1 "$tmp/t.svg") == "</svg>" ]] &&
    for w in '>load ' '>reset ' '>profile ' '>plan ' '>populate ' '>ready<' 'budget 64.00 MiB<' \
        '>kv cache ' '>weights 1016.00 KiB<' 'memory (GiB)' 'time (seconds)'; do
        grep -qF -- "$w" "$tmp/t.svg" || { echo "missing $w"; false; }; done >"$tmp/t.why"; then
    ok "profile --timeline"
else
    fail "profile --timeline" "$(cat "$tmp/t.err" "$tmp/t.why")"
fi
expect "profile --timeline of a failed plan" 1 "memory timeline written to $tmp/t2.svg" -- \
    "$snug" profile --memory 12MiB --max-model-len 512 --timeline "$tmp/t2.svg"
expect "profile --timeline unwritable" 1 "/nonexistent-dir/t.svg" -- \
    "$snug" profile --memory 64MiB --max-model-len 512 --timeline /nonexistent-dir/t.svg
expect "profile --timeline-events" 2 "--timeline-events expects 16 to 268435456, got '3'" -- \
    "$snug" profile --timeline "$tmp/t3.svg" --timeline-events 3
expect "profile bad memory" 2 "--memory expects a byte count (6GiB, 1500MB), got '6 lots'" -- "$snug" profile --memory "6 lots"
expect "profile bad fraction" 2 "--memory-fraction expects a number in (0, 1], got '1.5'" -- "$snug" profile --memory-fraction 1.5
expect "profile both budgets" 2 "--memory and --memory-fraction: give one" -- "$snug" profile --memory 1GiB --memory-fraction 0.5
expect "profile max-model-len beyond the model" 1 "--max-model-len 1000: the model has 512 positions" -- "$snug" profile --max-model-len 1000 --memory 1GiB
expect "profile batched tokens below seqs" 1 "must be at least --max-num-seqs" -- "$snug" profile --memory 1GiB --max-num-seqs 64 --max-num-batched-tokens 16

expect "no command" 2 "usage: snug COMMAND" -- "$snug"
expect "unknown command" 2 "unknown command 'frobnicate'" -- "$snug" frobnicate
expect "help" 0 "commands:" -- "$snug" --help

# expect_help NAME PATTERN -- CMD...: CMD exits 0 with PATTERN on stdout and nothing on stderr.
expect_help() {
    local name=$1 pattern=$2
    shift 3
    local rc
    "$@" >"$tmp/help.out" 2>"$tmp/help.err"
    rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$name" "exit status $rc, expected 0" "$(head -c 2000 "$tmp/help.err")"
    elif [[ -s "$tmp/help.err" ]]; then
        fail "$name" "stderr is not empty" "$(head -c 2000 "$tmp/help.err")"
    elif ! grep -qF -- "$pattern" "$tmp/help.out"; then
        fail "$name" "stdout lacks: $pattern" "$(head -c 2000 "$tmp/help.out")"
    else
        ok "$name"
    fi
}
expect_help "snug --help on stdout" "usage: snug COMMAND" -- "$snug" --help
expect_help "snug -h" "usage: snug COMMAND" -- "$snug" -h
expect_help "snug help" "usage: snug COMMAND" -- "$snug" help
expect_help "snug help serve" "usage: snug serve" -- "$snug" help serve
for c in inspect load mkmodel profile serve generate tokenize detokenize chat-template; do
    expect_help "$c --help" "usage: snug $c" -- "$snug" "$c" --help
    expect_help "$c -h" "usage: snug $c" -- "$snug" "$c" -h
done
expect_help "profile --help lists --quiet" "[--quiet]" -- "$snug" profile --help
for f in llama2c gguf tokenizer; do
    expect_help "convert $f --help" "snug convert $f" -- "$snug" convert "$f" --help
done
expect_help "convert --help" "usage: snug convert" -- "$snug" convert --help
expect_help "--help after other arguments" "usage: snug inspect" -- "$snug" inspect models/stories260K --tp 2 --help
expect_help "--version" "snug $(sed -n 's/^#define SNUG_VERSION "\(.*\)"$/\1/p' include/snug.h)" -- "$snug" --version
expect_help "version" "isa: " -- "$snug" version
"$snug" --version >"$tmp/version.out"
isa=$(sed -n 's/^isa: //p' "$tmp/version.out")
case $isa in # the instruction bf16 matmuls run: the table's FMA, or on avx512bf16 what calibration chose;
# and the rows up to which the matrix-vector path serves them (AVX2: 16, in passes of 4)
scalar) bf16='scalar' rows=4 ;;
avx2) bf16='vfmadd231ps ymm' rows=16 ;;
avx512) bf16='vfmadd231ps zmm' rows=4 ;;
*) bf16='(vfmadd231ps zmm|vdpbf16ps zmm)' rows=4 ;;
esac
if [[ $(wc -l <"$tmp/version.out") -eq 6 ]] && grep -qE '^commit: ([0-9a-f]{7,}|unknown)$' "$tmp/version.out" &&
    grep -qE '^build: MPI (on|off), ARCH ' "$tmp/version.out" &&
    grep -qE '^isa: (scalar|avx2|avx512|avx512bf16)$' "$tmp/version.out" &&
    grep -qE "^kernels: $isa; BF16 matmuls on $bf16, up to $rows rows on " "$tmp/version.out" &&
    grep -qE '^threads: [1-9][0-9]* ' "$tmp/version.out"; then
    ok "--version lines: version, commit, build, isa, kernels ($(sed -n 's/^kernels: //p' "$tmp/version.out")), threads"
else
    fail "--version lines: version, commit, build, isa, kernels, threads" "$(cat "$tmp/version.out")"
fi

# --version names the instruction set a model would run on: SNUG_ISA's when it is set
expect "SNUG_ISA=scalar --version" 0 "isa: scalar" -- env SNUG_ISA=scalar "$snug" --version
expect "SNUG_ISA=scalar --version: its kernels" 0 "kernels: scalar; BF16 matmuls on scalar" \
    -- env SNUG_ISA=scalar "$snug" --version
if [[ $isa != scalar ]]; then
    expect "SNUG_ISA=avx2 --version" 0 "isa: avx2" -- env SNUG_ISA=avx2 "$snug" --version
fi
expect "SNUG_ISA that names none: --version fails" 1 "SNUG_ISA: expected scalar, avx2, avx512 or avx512bf16, got 'avx3'" \
    -- env SNUG_ISA=avx3 "$snug" --version

# a misspelled option or command names the closest known one; a far one names none
expect "misspelled serve option" 2 "unknown option '--max-model-lenn'; did you mean '--max-model-len'?" \
    -- "$snug" serve --max-model-lenn 512
expect "misspelled profile option (swap)" 2 "unknown option '--max-modle-len'; did you mean '--max-model-len'?" \
    -- "$snug" profile --max-modle-len 512
expect "misspelled generate option" 2 "unknown option '--temprature'; did you mean '--temperature'?" \
    -- "$snug" generate --temprature 0.5
expect "misspelled option with a value" 2 "unknown option '--tpp'; did you mean '--tp'?" \
    -- "$snug" inspect models/stories260K --tpp=2
expect "option prefix" 2 "unknown option '--all'; did you mean '--all-ranks'?" -- "$snug" load models/stories260K --all
expect "single-dash option" 2 "did you mean '--json'?" -- "$snug" inspect models/stories260K -json
expect "misspelled detokenize option" 2 "did you mean '--skip-special'?" -- "$snug" detokenize models/stories260K --skip-specal 1
expect "misspelled command" 2 "unknown command 'serv'; did you mean 'serve'?" -- "$snug" serv
"$snug" generate --frobnicate >/dev/null 2>"$tmp/far.err"
if grep -q "did you mean" "$tmp/far.err"; then
    fail "a far option names none" "$(cat "$tmp/far.err")"
else
    ok "a far option names none"
fi

# examples/complete.c, the public API's example (make builds it)
expect "example complete" 0 "choice 1 (finish length): Once upon a time" -- "$build/examples/complete"
expect "example complete counters" 0 "kv blocks 0 of 128 used, 1 requests finished" -- "$build/examples/complete"
expect "example complete bad model" 1 "complete: open: SNUG_IO: /nonexistent/config.json" -- \
    "$build/examples/complete" /nonexistent

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
