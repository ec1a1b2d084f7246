#!/usr/bin/env bash
# make-seeds.sh: writes the seed corpora of the fuzz harnesses:
#   tests/fuzz/safetensors/  small safetensors files (every dtype, metadata,
#                            scalars, zero-size tensors, 8 dimensions)
#   tests/fuzz/gguf/         cut-down GGUF files (every value type, arrays of
#                            strings, numbers and bools, F32/F16/BF16/Q4_0/
#                            Q8_0/Q4_K/Q6_K tensors, v2 and v3, alignment 64)
#   tests/fuzz/index/        model.safetensors.index.json files
#   tests/fuzz/config/       config.json files (hand-made for every rope type
#                            and family, plus the real ones under
#                            $SNUG_HF_DIR/*/config.json when that exists)
#   tests/fuzz/http_head/    request heads and chunked bodies as clients send
#                            them, and one near-miss for each rule the gate's
#                            reader enforces
# Most seeds are valid; the files named near-*.* break one rule each, so that
# the fuzzer starts next to the edges. Every file is a few KB at most.
#
#   tests/fuzz/make-seeds.sh
#
# Needs only bash and coreutils; output does not depend on time or
# randomness. `make test` replays every seed (tests/fuzz/replay.c), and
# `make fuzz` starts libFuzzer from them. The seeds were made by running
# this script once; re-run it after changing it.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")"
hf_dir=${SNUG_HF_DIR:-../../../shared/tokenizers/hf}
mkdir -p safetensors gguf index config http_head

# ---- bytes: u8 u32 u64 zeros run_of pat -----------------------------------
# shellcheck source=../lib/bytes.sh
source "../lib/bytes.sh"

# ---- safetensors -----------------------------------------------------------
# st FILE HEADER DATA_BYTES: header length, header, DATA_BYTES pattern bytes.
st() {
    local n
    n=$(printf '%s' "$2" | wc -c)
    { u64 "$n"; printf '%s' "$2"; pat "$3"; } >"$1"
}
# ent NAME DTYPE SHAPE BEGIN END: one tensor entry.
ent() { printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' "$@"; }

S=safetensors
st $S/empty.safetensors '{}' 0
st $S/metadata-only.safetensors '{"__metadata__":{"format":"pt","source":"snug"}}' 0
st $S/one-f32.safetensors "{$(ent w F32 2,3 0 24)}" 24
st $S/scalar.safetensors "{$(ent s F32 '' 0 4)}" 4
st $S/zero-size.safetensors "{$(ent empty F32 0,4 0 0),$(ent b F16 2 0 4)}" 4
st $S/eight-dims.safetensors "{$(ent t BF16 1,1,1,1,1,1,2,2 0 8)}" 8
hdr='{"__metadata__":{"format":"pt"}'
off=0
for dt in F64:8 F32:4 F16:2 BF16:2 I64:8 I32:4 I16:2 I8:1 U64:8 U32:4 U16:2 U8:1 BOOL:1 \
          F8_E4M3:1 F8_E5M2:1 F8_E8M0:1 C64:8; do
    name=${dt%%:*} size=${dt#*:}
    hdr+=",$(ent "t.$name" "$name" 2 $off $((off + 2 * size)))"
    off=$((off + 2 * size))
done
st $S/every-dtype.safetensors "$hdr}" $off
# As Hugging Face writes them: header padded with spaces to a multiple of 8.
h="{$(ent model.norm.weight F32 4 0 16)}"
while (((${#h} % 8) != 0)); do h+=' '; done
st $S/padded-header.safetensors "$h" 16
st $S/unicode-names.safetensors "{$(ent 'blocks.0/é.weight' F16 2 0 4),$(ent '层.bias' F16 1 4 6)}" 6
# A tiny Llama: embeddings, one layer, norm (tensors out of name order).
hdr="{\"__metadata__\":{\"format\":\"pt\"}"
off=0
for t in model.embed_tokens.weight:8,4 model.layers.0.input_layernorm.weight:4 \
         model.layers.0.self_attn.q_proj.weight:4,4 model.layers.0.self_attn.k_proj.weight:2,4 \
         model.layers.0.self_attn.v_proj.weight:2,4 model.layers.0.self_attn.o_proj.weight:4,4 \
         model.layers.0.post_attention_layernorm.weight:4 \
         model.layers.0.mlp.gate_proj.weight:6,4 model.layers.0.mlp.up_proj.weight:6,4 \
         model.layers.0.mlp.down_proj.weight:4,6 model.norm.weight:4; do
    shape=${t#*:}
    n=$((${shape/,/*}))
    hdr+=",$(ent "${t%%:*}" F16 "$shape" $off $((off + 2 * n)))"
    off=$((off + 2 * n))
done
st $S/tiny-llama.safetensors "$hdr}" $off
st $S/near-trailing-byte.safetensors "{$(ent a F32 1 0 4)}" 5
st $S/near-gap.safetensors "{$(ent a F32 1 0 4),$(ent b F32 1 5 9)}" 9
st $S/near-wrong-size.safetensors "{$(ent a F32 3 0 8)}" 8
st $S/near-unknown-dtype.safetensors "{$(ent a F128 1 0 16)}" 16
{ u64 200; printf '{}'; } >$S/near-header-past-end.safetensors

# ---- GGUF ------------------------------------------------------------------
ghdr() { printf 'GGUF'; u32 "$1"; u64 "$2"; u64 "$3"; }
gs() { u64 "$(printf '%s' "$1" | wc -c)"; printf '%s' "$1"; }
# kv KEY TYPE VALUE: a scalar key (TYPE as in GGUF: 0 uint8 ... 12 float64;
# floats are given as their bit patterns).
kv() {
    gs "$1"
    u32 "$2"
    case $2 in
        0 | 1 | 7) u8 "$3" ;;
        2 | 3) u8 $(($3 & 255)); u8 $(($3 >> 8 & 255)) ;;
        4 | 5 | 6) u32 "$3" ;;
        8) gs "$3" ;;
        10 | 11 | 12) u64 "$3" ;;
    esac
}
# kv_strs KEY STRING...: an array of strings.
kv_strs() {
    local k=$1 s
    shift
    gs "$k"; u32 9; u32 8; u64 $#
    for s in "$@"; do gs "$s"; done
}
# kv_arr KEY ELEMENT_TYPE ELEMENT_BYTES VALUE...: an array of numbers.
kv_arr() {
    local k=$1 t=$2 b=$3 v
    shift 3
    gs "$k"; u32 9; u32 "$t"; u64 $#
    for v in "$@"; do
        case $b in 1) u8 "$v" ;; 4) u32 "$v" ;; 8) u64 "$v" ;; esac
    done
}
tinfo() {
    gs "$1"; u32 "$2"
    local d
    for d in $3; do u64 "$d"; done
    u32 "$4"; u64 "$5"
}
# gg FILE ALIGN DATA_BYTES: stdin, padded to ALIGN, then pattern data.
gg() {
    cat >"$1"
    local n
    n=$(wc -c <"$1")
    { zeros $((($2 - n % $2) % $2)); pat "$3"; } >>"$1"
}
F32_ONE=0x3f800000

G=gguf
ghdr 3 0 0 | gg $G/empty-v3.gguf 32 0
{ ghdr 2 1 1; kv general.architecture 8 llama; tinfo w 1 4 0 0; } | gg $G/one-tensor-v2.gguf 32 16
{
    ghdr 3 5 19
    kv general.architecture 8 llama
    kv t.u8 0 200; kv t.i8 1 255; kv t.u16 2 60000; kv t.i16 3 65535
    kv t.u32 4 4000000000; kv t.i32 5 0xffffffff; kv t.f32 6 $F32_ONE; kv t.bool 7 1
    kv t.u64 10 0x7fffffffffffffff; kv t.i64 11 0xfffffffffffffffe
    kv t.f64 12 0x3ff8000000000000; kv t.str 8 'héllo'
    kv_strs t.strings '<unk>' '<s>' '</s>' ' the' ''
    kv_arr t.i32s 5 4 1 2 3
    kv_arr t.f32s 6 4 $F32_ONE 0x40000000
    kv_arr t.bools 7 1 0 1 1
    kv_arr t.empty 0 1
    kv_arr t.u64s 10 8 0 18
    tinfo f32 1 4 0 0          # 16 bytes at 0
    tinfo f16 2 "2 2" 1 32     # 8 bytes at 32
    tinfo bf16 1 2 30 64       # 4 bytes at 64
    tinfo q4_0 1 32 2 96       # 18 bytes at 96
    tinfo q8_0 2 "32 1" 8 128  # 34 bytes at 128
} | gg $G/every-type.gguf 32 162
{
    ghdr 3 2 13
    kv general.architecture 8 llama
    kv general.name 8 tiny
    kv llama.context_length 4 128
    kv llama.embedding_length 4 8
    kv llama.block_count 4 1
    kv llama.feed_forward_length 4 16
    kv llama.attention.head_count 4 2
    kv llama.attention.layer_norm_rms_epsilon 6 0x3727c5ac
    kv tokenizer.ggml.model 8 llama
    kv_strs tokenizer.ggml.tokens '<unk>' '<s>' '</s>' '▁a' '▁b' 'c'
    kv_arr tokenizer.ggml.scores 6 4 0 0 0 0xbf800000 0xc0000000 0xc0400000
    kv_arr tokenizer.ggml.token_type 5 4 2 3 3 1 1 1
    kv tokenizer.ggml.bos_token_id 4 1
    tinfo token_embd.weight 2 "8 6" 0 0   # 192 bytes at 0
    tinfo output_norm.weight 1 8 0 192    # 32 bytes at 192
} | gg $G/tiny-llama.gguf 32 224
{
    ghdr 3 2 1
    kv general.alignment 4 64
    tinfo a 1 4 0 0
    tinfo b 4 "2 1 1 2" 0 64
} | gg $G/alignment-64.gguf 64 80
{
    ghdr 3 2 0
    tinfo q4_k 1 256 12 0      # 144 bytes at 0
    tinfo q6_k 1 256 14 160    # 210 bytes at 160
} | gg $G/k-quants.gguf 32 370
{ ghdr 3 2 0; tinfo late 1 4 0 32; tinfo early 1 4 0 0; } | gg $G/offsets-out-of-order.gguf 32 48
{ ghdr 1 0 0; } | gg $G/near-version-1.gguf 32 0
{ ghdr 3 1 0; tinfo w 1 4 0 4; } | gg $G/near-unaligned.gguf 32 32
{ ghdr 3 0 1; kv t.bool 7 2; } | gg $G/near-bool-2.gguf 32 0
{ ghdr 3 1 0; tinfo w 1 64 0 0; } | gg $G/near-data-past-end.gguf 32 64
{ ghdr 3 0 1; gs t.str; u32 8; u64 64; printf 'short'; } >$G/near-string-past-end.gguf

# ---- model.safetensors.index.json ------------------------------------------
I=index
# index FILE METADATA TENSOR=FILE...: METADATA is the JSON of "metadata" or ''.
index() {
    local file=$1 meta=$2 kv sep=''
    shift 2
    {
        printf '{\n'
        [[ -z $meta ]] || printf '  "metadata": %s,\n' "$meta"
        printf '  "weight_map": {\n'
        for kv in "$@"; do
            printf '%s    "%s": "%s"' "$sep" "${kv%%=*}" "${kv#*=}"
            sep=$',\n'
        done
        printf '\n  }\n}\n'
    } >"$file"
}
S1=model-00001-of-00003.safetensors S2=model-00002-of-00003.safetensors
S3=model-00003-of-00003.safetensors
# The layout `snug mkmodel --shards 3` writes, for a 2-layer model.
map=(model.embed_tokens.weight=$S1)
for l in 0 1; do
    s=$S1
    [[ $l -eq 1 ]] && s=$S2
    for t in input_layernorm self_attn.q_proj self_attn.k_proj self_attn.v_proj \
             self_attn.o_proj post_attention_layernorm mlp.gate_proj mlp.up_proj mlp.down_proj; do
        map+=("model.layers.$l.$t.weight=$s")
    done
done
map+=(model.norm.weight=$S3 lm_head.weight=$S3)
index $I/three-shards.json '{"total_size": 1040128}' "${map[@]}"
index $I/one-entry.json '{"total_size": 16}' model.norm.weight=model.safetensors
index $I/no-metadata.json '' a=model-00001-of-00002.safetensors b=model-00002-of-00002.safetensors
index $I/metadata-null.json null a=$S1
index $I/metadata-extra.json '{"total_size": 8, "format": "pt", "nested": {"x": [1, 2]}}' a=$S1 b=$S1
index $I/unicode.json '{}' 'é.weight=shard-ü.safetensors' 'blocks/0.weight=shard-ü.safetensors'
files=()
for i in $(seq 1 12); do files+=("t$i=part-$i.safetensors"); done
index $I/twelve-files.json '{"total_size": 48}' "${files[@]}"
index $I/near-dot-dot.json '' a=.. b=$S1
index $I/near-slash.json '' a=../$S1
index $I/near-empty-file.json '' a=
printf '{"weight_map": {}}\n' >$I/near-empty-map.json
printf '{"weight_map": {"a": "%s", "a": "%s"}}\n' $S1 $S2 >$I/near-duplicate.json
printf '{"metadata": {"total_size": -1}, "weight_map": {"a": "%s"}}\n' $S1 >$I/near-negative-size.json

# ---- config.json -----------------------------------------------------------
C=config
# What `snug mkmodel --preset tiny` writes.
cat >$C/mkmodel-tiny.json <<'EOF'
{
  "architectures": [
    "LlamaForCausalLM"
  ],
  "model_type": "llama",
  "hidden_act": "silu",
  "hidden_size": 64,
  "intermediate_size": 172,
  "num_hidden_layers": 5,
  "num_attention_heads": 8,
  "num_key_value_heads": 4,
  "head_dim": 8,
  "vocab_size": 512,
  "max_position_embeddings": 512,
  "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0,
  "rope_scaling": null,
  "tie_word_embeddings": true,
  "attention_bias": false,
  "torch_dtype": "float32",
  "bos_token_id": 1,
  "eos_token_id": 2,
  "sliding_window": null
}
EOF
# cfg FILE EXTRA_FIELDS: a small Llama config with extra fields (JSON text
# that starts with a comma; keys must not repeat those of the base).
cfg() {
    printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256%s}\n' \
        "$2" >"$1"
}
cfg $C/minimal.json ''
cfg $C/rope-llama3.json ', "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "eos_token_id": [128, 129, 130], "torch_dtype": "bfloat16"'
cfg $C/rope-yarn.json ', "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 1.0, "attention_factor": 1.1}'
cfg $C/rope-linear.json ', "rope_scaling": {"type": "linear", "factor": 2.0}, "torch_dtype": "float16"'
cfg $C/rope-dynamic.json ', "rope_scaling": {"rope_type": "dynamic", "factor": 2.5}, "dtype": "float32"'
cfg $C/rope-parameters.json ', "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}'
cfg $C/head-dim-given.json ', "head_dim": 32, "attention_bias": true, "mlp_bias": false'
printf '{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 2, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "bos_token_id": 250, "eos_token_id": 251, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06}\n' >$C/qwen2.json
printf '{"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 256, "sliding_window": 1024, "eos_token_id": null, "bos_token_id": null}\n' >$C/mistral-by-type.json
cfg $C/near-odd-head-dim.json ', "head_dim": 9'
cfg $C/near-kv-heads.json ', "num_key_value_heads": 3'
cfg $C/near-llama3-low-high.json ', "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}'
cfg $C/near-eos-out-of-vocab.json ', "eos_token_id": 256'
for m in gemma-2b-it gpt2 mistral-v0.3 smollm2-135m tinyllama-1.1b-chat; do
    if [[ -f $hf_dir/$m/config.json ]]; then cp "$hf_dir/$m/config.json" "$C/hf-$m.json"; fi
done
# ---- http_head --------------------------------------------------------------
H=http_head
req() { printf "$2" >"$H/$1"; } # req FILE PRINTF-FORMAT
req get-health.http 'GET /health HTTP/1.1\r\nHost: localhost:8000\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n'
req post-json.http 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"prompt": "Hi"}\n'
req post-chunked.http 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n3\r\n abc\r\n0\r\nTrailer: x\r\n\r\n'
req pipelined.http 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
req http10-keepalive.http 'GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\n\r\n'
req leading-crlf.http '\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: x\r\nOrigin: http://a.example\r\n\r\n'
req absolute-form.http 'GET http://localhost:8000/health?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n'
req expect-continue.http 'POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}'
req near-garbage.http 'GARBAGE\r\n\r\n'
req near-bare-lf.http 'GET / HTTP/1.1\nHost: x\n\n'
req near-bare-cr.http 'GET / HTTP/1.1\rHost: x\r\n\r\n'
req near-no-colon.http 'GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n'
req near-space-before-colon.http 'GET / HTTP/1.1\r\nHost : x\r\n\r\n'
req near-obs-fold.http 'GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n'
req near-nul-name.http 'GET / HTTP/1.1\r\nHost: x\r\nX-\0A: 1\r\n\r\n'
req near-nul-value.http 'GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\0junk\r\n\r\n'
req near-cl-abc.http 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'
req near-cl-twice.http 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello'
req near-cl-list.http 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello'
req near-cl-huge.http 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n'
req near-te-cl.http 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n'
req near-te-gzip.http 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n'
req near-te-http10.http 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
req near-no-host.http 'GET / HTTP/1.1\r\n\r\n'
req near-two-hosts.http 'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'
req near-pct00.http 'POST /v1/completions%%00 HTTP/1.1\r\nHost: x\r\n\r\n'
req near-version.http 'GET / HTTP/9.9\r\nHost: x\r\n\r\n'
req near-version-shape.http 'GET / HTTPS/1.1\r\nHost: x\r\n\r\n'
req near-long-method.http 'GETGETGETGETGETGETGET / HTTP/1.1\r\nHost: x\r\n\r\n'
req near-chunk-size.http 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'
req near-chunk-crlf.http 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n'
req near-chunk-digits.http 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000001\r\na\r\n0\r\n\r\n'
{ printf 'GET /'; head -c 600 /dev/zero | tr '\0' 'a'; printf ' HTTP/1.1\r\nHost: x\r\n\r\n'; } >$H/near-long-target.http
{ printf 'GET / HTTP/1.1\r\nHost: x\r\n'; for i in $(seq 1 20); do printf 'X-%d: %d\r\n' "$i" "$i"; done; printf '\r\n'; } >$H/near-many-fields.http
{ printf 'GET / HTTP/1.1\r\nHost: x\r\nX-Big: '; head -c 2100 /dev/zero | tr '\0' 'b'; printf '\r\n\r\n'; } >$H/near-big-head.http
echo "make-seeds.sh: $(ls safetensors | wc -l) safetensors, $(ls gguf | wc -l) gguf," \
     "$(ls index | wc -l) index, $(ls config | wc -l) config, $(ls http_head | wc -l) http_head seeds"
