#!/usr/bin/env bash
# make-corpus.sh: writes the malformed-file corpus of snug's readers, one
# hand-made file per rule of each reader, with the manifest EXPECT (path,
# expected status, a substring of the expected message) and README.md (the
# same list with each rule in words). tests/test_malformed.c runs every
# entry of EXPECT through its reader.
#
#   tests/data/malformed/make-corpus.sh
#
# Needs only bash and coreutils. Re-running it removes the generated files
# and writes identical ones (nothing depends on time or randomness).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")"

rm -rf safetensors gguf config index checkpoint
mkdir -p safetensors gguf config index checkpoint
: >EXPECT
rows=()

# expect PATH STATUS SUBSTRING RULE: adds a manifest line and a README row.
expect() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>EXPECT
    rows+=("| \`$1\` | $2 | $4 |")
}

# ---- bytes: u8 u32 u64 zeros run_of pat -----------------------------------
# shellcheck source=../../lib/bytes.sh
source "../../lib/bytes.sh"

# ---- safetensors -----------------------------------------------------------
# st FILE HEADER DATA_BYTES: the 8-byte header length, the header (through
# printf %b, so \xff and \x00 can be written) and DATA_BYTES zero bytes.
st() {
    local n
    n=$(printf '%b' "$2" | wc -c)
    { u64 "$n"; printf '%b' "$2"; zeros "$3"; } >"$1"
}
# ent NAME DTYPE SHAPE BEGIN END: one tensor entry of a header.
ent() { printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' "$@"; }

S=safetensors
printf '\x10\x00\x00\x00\x00' >$S/file-under-8-bytes.safetensors
expect $S/file-under-8-bytes.safetensors SNUG_FORMAT \
    "file is 5 bytes; a safetensors file starts with an 8-byte header length" \
    "the file is shorter than the 8-byte header length"
{ u64 1; printf '{'; } >$S/header-length-1.safetensors
expect $S/header-length-1.safetensors SNUG_FORMAT "header length 1 is below the minimum of 2" \
    "the header length is below 2"
{ u64 100000001; printf '{}'; } >$S/header-length-over-limit.safetensors
expect $S/header-length-over-limit.safetensors SNUG_FORMAT \
    "header length 100000001 is above the limit of 100000000 bytes" \
    "the header length is above 100,000,000"
{ u64 64; printf '{}'; } >$S/header-length-past-eof.safetensors
expect $S/header-length-past-eof.safetensors SNUG_FORMAT \
    "header length 64 runs past the end of the file (10 bytes)" \
    "the header runs past the end of the file"
st $S/header-not-utf8.safetensors '{"a\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
expect $S/header-not-utf8.safetensors SNUG_FORMAT "header is not valid UTF-8" \
    "the header is not valid UTF-8"
st $S/header-nul.safetensors '{}\x00' 0
expect $S/header-nul.safetensors SNUG_FORMAT "header contains a NUL byte" \
    "the header holds a NUL byte"
st $S/header-not-json.safetensors '{"a":{"dtype":"F32",' 0
expect $S/header-not-json.safetensors SNUG_FORMAT "header: not valid JSON: line 1" \
    "the header is not JSON"
st $S/header-array.safetensors '[1, 2]' 0
expect $S/header-array.safetensors SNUG_FORMAT \
    "header: expected a JSON object at the top, found an array of 2" \
    "the header is a JSON array, not an object"
st $S/duplicate-name.safetensors "{$(ent a F32 1 0 4),$(ent a F32 1 4 8)}" 8
expect $S/duplicate-name.safetensors SNUG_FORMAT "duplicate object key" \
    "a tensor name appears twice"
st $S/metadata-not-object.safetensors '{"__metadata__":"pt"}' 0
expect $S/metadata-not-object.safetensors SNUG_FORMAT \
    "__metadata__ must be an object of strings, found the string \"pt\"" \
    '`__metadata__` is not an object'
st $S/metadata-not-string.safetensors '{"__metadata__":{"format":1}}' 0
expect $S/metadata-not-string.safetensors SNUG_FORMAT \
    "__metadata__ entry 'format' must be a string, found the integer 1" \
    'a `__metadata__` value is not a string'
st $S/entry-not-object.safetensors '{"a":[1]}' 0
expect $S/entry-not-object.safetensors SNUG_FORMAT \
    "tensor 'a': expected an object with dtype, shape and data_offsets, found an array of 1" \
    "a tensor entry is not an object"
st $S/unknown-key.safetensors \
    '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offset":0}}' 4
expect $S/unknown-key.safetensors SNUG_FORMAT "tensor 'a': unknown key 'offset'" \
    "a tensor entry has a key other than dtype, shape and data_offsets"
st $S/missing-dtype.safetensors '{"a":{"shape":[1],"data_offsets":[0,4]}}' 4
expect $S/missing-dtype.safetensors SNUG_FORMAT "tensor 'a': missing key 'dtype'" \
    "a tensor entry has no dtype"
st $S/missing-shape.safetensors '{"a":{"dtype":"F32","data_offsets":[0,4]}}' 4
expect $S/missing-shape.safetensors SNUG_FORMAT "tensor 'a': missing key 'shape'" \
    "a tensor entry has no shape"
st $S/missing-data-offsets.safetensors '{"a":{"dtype":"F32","shape":[1]}}' 4
expect $S/missing-data-offsets.safetensors SNUG_FORMAT "tensor 'a': missing key 'data_offsets'" \
    "a tensor entry has no data_offsets"
st $S/dtype-not-string.safetensors '{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}' 4
expect $S/dtype-not-string.safetensors SNUG_FORMAT \
    "tensor 'a': dtype must be a string, found the integer 4" "the dtype is not a string"
st $S/unknown-dtype.safetensors "{$(ent a F12 1 0 4)}" 4
expect $S/unknown-dtype.safetensors SNUG_FORMAT "tensor 'a': unknown dtype 'F12'" \
    "the dtype is not one of the safetensors dtypes"
st $S/shape-not-array.safetensors '{"a":{"dtype":"F32","shape":4,"data_offsets":[0,4]}}' 4
expect $S/shape-not-array.safetensors SNUG_FORMAT \
    "tensor 'a': shape must be an array of integers, found the integer 4" \
    "the shape is not an array"
st $S/shape-negative.safetensors "{$(ent a F32 -1 0 4)}" 4
expect $S/shape-negative.safetensors SNUG_FORMAT \
    "tensor 'a': shape entry 0 must be an integer in [0, 2^48), found the integer -1" \
    "a shape entry is negative"
st $S/shape-2-pow-48.safetensors "{$(ent a F32 2,281474976710656 0 4)}" 4
expect $S/shape-2-pow-48.safetensors SNUG_FORMAT \
    "shape entry 1 must be an integer in [0, 2^48), found the integer 281474976710656" \
    "a shape entry is 2^48 or more"
st $S/shape-not-integer.safetensors "{$(ent a F32 1.5 0 4)}" 4
expect $S/shape-not-integer.safetensors SNUG_FORMAT \
    "shape entry 0 must be an integer in [0, 2^48), found the number 1.5" \
    "a shape entry is not an integer"
st $S/shape-9-dims.safetensors "{$(ent a F32 1,1,1,1,1,1,1,1,1 0 4)}" 4
expect $S/shape-9-dims.safetensors SNUG_FORMAT \
    "tensor 'a': shape has 9 dimensions; at most 8 are accepted" "the shape has more than 8 dimensions"
st $S/data-offsets-one-entry.safetensors '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}' 4
expect $S/data-offsets-one-entry.safetensors SNUG_FORMAT \
    "tensor 'a': data_offsets must be an array of two integers [begin, end], found an array of 1" \
    "data_offsets is not two entries"
st $S/data-offsets-negative.safetensors "{$(ent a F32 1 -4 0)}" 4
expect $S/data-offsets-negative.safetensors SNUG_FORMAT \
    "tensor 'a': data_offsets entries must be non-negative integers" \
    "a data_offsets entry is negative (or not an integer)"
st $S/data-offsets-reversed.safetensors "{$(ent a F32 1 8 4)}" 8
expect $S/data-offsets-reversed.safetensors SNUG_FORMAT \
    "tensor 'a': data_offsets begin 8 is after end 4" "data_offsets begin is after end"
st $S/byte-count-mismatch.safetensors "{$(ent a F32 2 0 4)}" 4
expect $S/byte-count-mismatch.safetensors SNUG_FORMAT \
    "tensor 'a': data_offsets [0, 4] hold 4 bytes but dtype F32 and shape [2] need 8" \
    "data_offsets do not span dtype size x element count"
st $S/element-count-overflow.safetensors "{$(ent a F32 4294967296,4294967296 0 4)}" 4
expect $S/element-count-overflow.safetensors SNUG_FORMAT \
    "tensor 'a': element count of the shape overflows 64 bits" \
    "the product of the shape overflows 64 bits"
st $S/byte-size-overflow.safetensors "{$(ent a F64 1099511627776,4194304 0 4)}" 4
expect $S/byte-size-overflow.safetensors SNUG_FORMAT \
    "tensor 'a': byte size of the shape overflows 64 bits" \
    "element count x dtype size overflows 64 bits"
st $S/gap.safetensors "{$(ent a F32 1 0 4),$(ent b F32 1 8 12)}" 12
expect $S/gap.safetensors SNUG_FORMAT \
    "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes after offset 4" \
    "tensors are not contiguous (a gap between two)"
st $S/overlap.safetensors "{$(ent a F32 2 0 8),$(ent b F32 2 4 12)}" 12
expect $S/overlap.safetensors SNUG_FORMAT \
    "tensor 'b': data_offsets [4, 12] overlap the previous tensor, which ends at 8" \
    "two tensors overlap"
st $S/truncated.safetensors "{$(ent a F32 4 0 16)}" 8
expect $S/truncated.safetensors SNUG_FORMAT \
    "tensor 'a': data ends at byte 16 of the data section, which has only 8 bytes (the file is truncated)" \
    "tensor data runs past the end of the file"
st $S/trailing-bytes.safetensors "{$(ent a F32 1 0 4)}" 6
expect $S/trailing-bytes.safetensors SNUG_FORMAT \
    "2 trailing bytes after the last tensor (data ends at 4, the data section has 6)" \
    "bytes after the last tensor"
st $S/empty-name.safetensors "{$(ent '' F32 1 0 4)}" 4
expect $S/empty-name.safetensors SNUG_FORMAT "a tensor has an empty name" \
    "a tensor name is empty"
st $S/name-too-long.safetensors "{$(ent "$(run_of n 1025)" F32 1 0 4)}" 4
expect $S/name-too-long.safetensors SNUG_FORMAT \
    "tensor name of 1025 bytes ('nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...') is longer than the limit of 1024 bytes" \
    "a tensor name is longer than 1,024 bytes"

# ---- GGUF ------------------------------------------------------------------
# ghdr VERSION N_TENSORS N_KV; gs STRING (u64 length and bytes); kv32 KEY
# VALUE (a uint32 key); tinfo NAME N_DIMS "DIMS" TYPE OFFSET (a tensor info).
ghdr() { printf 'GGUF'; u32 "$1"; u64 "$2"; u64 "$3"; }
gs() { u64 ${#1}; printf '%s' "$1"; }
kv32() { gs "$1"; u32 4; u32 "$2"; }
tinfo() {
    gs "$1"
    u32 "$2"
    local d
    for d in $3; do u64 "$d"; done
    u32 "$4"
    u64 "$5"
}
# pad FILE: zero bytes up to the next multiple of 32 (the data section).
pad() {
    local n
    n=$(wc -c <"$1")
    zeros $(((32 - n % 32) % 32)) >>"$1"
}
# gg FILE DATA_BYTES: stdin, padded to 32, then DATA_BYTES zero bytes.
gg() {
    cat >"$1"
    pad "$1"
    zeros "$2" >>"$1"
}

G=gguf
{ printf 'GGUF'; u32 3; printf '\x00\x00'; } >$G/too-short.gguf
expect $G/too-short.gguf SNUG_FORMAT "file is 10 bytes; a GGUF header needs 24" \
    "the file is shorter than the 24-byte header"
{ printf 'GGML'; u32 3; u64 0; u64 0; } | gg $G/bad-magic.gguf 0
expect $G/bad-magic.gguf SNUG_FORMAT "not a GGUF file (it does not start with \"GGUF\")" \
    "the magic is not GGUF"
ghdr 1 0 0 | gg $G/version-1.gguf 0
expect $G/version-1.gguf SNUG_UNSUPPORTED "GGUF version 1; snug reads versions 2 and 3" \
    "version 1"
ghdr 4 0 0 | gg $G/version-4.gguf 0
expect $G/version-4.gguf SNUG_UNSUPPORTED "GGUF version 4; snug reads versions 2 and 3" \
    "version 4"
ghdr 3 1099511627776 0 | gg $G/tensor-count-too-large.gguf 64
expect $G/tensor-count-too-large.gguf SNUG_FORMAT \
    "tensor count 1099511627776 is more than the file can hold" \
    "the tensor count is more than the file can hold"
ghdr 3 0 1000000 | gg $G/key-count-too-large.gguf 64
expect $G/key-count-too-large.gguf SNUG_FORMAT "key count 1000000 is more than the file can hold" \
    "the key count is more than the file can hold"
{ ghdr 3 0 1; u64 100; printf 'gener'; } >$G/key-truncated.gguf
expect $G/key-truncated.gguf SNUG_FORMAT \
    "a key needs 100 bytes at offset 32 but the file has 37 (truncated or a wrong length)" \
    "a key runs past the end of the file"
{ ghdr 3 0 1; kv32 '' 1; } | gg $G/key-empty.gguf 0
expect $G/key-empty.gguf SNUG_FORMAT "key 0 is empty" "a key is empty"
{ ghdr 3 0 1; u64 3; printf 'a\x00b'; u32 4; u32 1; } | gg $G/key-nul.gguf 0
expect $G/key-nul.gguf SNUG_FORMAT "a key contains a NUL byte" "a key holds a NUL byte"
{ ghdr 3 0 2; kv32 general.x 1; kv32 general.x 2; } | gg $G/duplicate-key.gguf 0
expect $G/duplicate-key.gguf SNUG_FORMAT "key 'general.x' appears twice" "a key appears twice"
{ ghdr 3 0 1; gs general.x; u32 13; u32 0; } | gg $G/unknown-value-type.gguf 0
expect $G/unknown-value-type.gguf SNUG_FORMAT "key 'general.x': value type 13 is unknown" \
    "a value type is unknown"
{ ghdr 3 0 1; gs general.x; u32 9; u32 9; u64 0; } | gg $G/nested-array.gguf 0
expect $G/nested-array.gguf SNUG_FORMAT \
    "key 'general.x': array element type 9 is a nested array (not supported)" \
    "an array of arrays"
{ ghdr 3 0 1; gs general.x; u32 9; u32 13; u64 0; } | gg $G/unknown-array-type.gguf 0
expect $G/unknown-array-type.gguf SNUG_FORMAT \
    "key 'general.x': array element type 13 is unknown" "an array's element type is unknown"
{ ghdr 3 0 1; gs general.x; u32 7; u8 2; } | gg $G/bool-not-0-or-1.gguf 0
expect $G/bool-not-0-or-1.gguf SNUG_FORMAT "key 'general.x': bool value 2 is neither 0 nor 1" \
    "a bool value is not 0 or 1"
{ ghdr 3 0 1; gs general.x; u32 9; u32 7; u64 2; u8 1; u8 3; } | gg $G/bool-array-not-0-or-1.gguf 0
expect $G/bool-array-not-0-or-1.gguf SNUG_FORMAT \
    "key 'general.x': bool element 1 is 3, neither 0 nor 1" \
    "an element of a bool array is not 0 or 1"
{ ghdr 3 0 1; gs general.x; u32 8; u64 1000; printf 'abc'; } >$G/string-past-end.gguf
expect $G/string-past-end.gguf SNUG_FORMAT \
    "a string value needs 1000 bytes at offset 53 but the file has 56" \
    "a string value runs past the end of the file"
{ ghdr 3 0 1; gs general.x; u32 9; u32 4; u64 1000; u64 0; } >$G/array-past-end.gguf
expect $G/array-past-end.gguf SNUG_FORMAT \
    "key 'general.x': array of 1000 elements runs past the end of the file" \
    "an array of numbers runs past the end of the file"
{ ghdr 3 0 1; gs general.x; u32 9; u32 8; u64 1000; u64 0; } >$G/string-array-past-end.gguf
expect $G/string-array-past-end.gguf SNUG_FORMAT \
    "key 'general.x': array of 1000 strings runs past the end of the file" \
    "an array of strings has more strings than the file can hold"
{ ghdr 3 0 1; gs general.x; u32 9; u32 8; u64 1; u64 50; printf 'ab'; } \
    >$G/string-in-array-past-end.gguf
expect $G/string-in-array-past-end.gguf SNUG_FORMAT \
    "element 0: " "a string in an array runs past the end of the file"
{ ghdr 3 1 0; tinfo t 0 "" 0 0; } | gg $G/n-dims-0.gguf 32
expect $G/n-dims-0.gguf SNUG_FORMAT "tensor 't': 0 dimensions; expected 1 to 4" \
    "a tensor has 0 dimensions"
{ ghdr 3 1 0; tinfo t 5 "1 1 1 1 1" 0 0; } | gg $G/n-dims-5.gguf 32
expect $G/n-dims-5.gguf SNUG_FORMAT "tensor 't': 5 dimensions; expected 1 to 4" \
    "a tensor has more than 4 dimensions"
{ ghdr 3 1 0; tinfo t 2 "4294967296 4294967296" 0 0; } | gg $G/element-count-overflow.gguf 32
expect $G/element-count-overflow.gguf SNUG_FORMAT "tensor 't': element count overflows" \
    "the product of the dimensions overflows"
{ ghdr 3 1 0; tinfo t 1 "4611686018427387904" 0 0; } | gg $G/byte-size-overflow.gguf 32
expect $G/byte-size-overflow.gguf SNUG_FORMAT "tensor 't': byte size overflows" \
    "the tensor's byte size overflows"
{ ghdr 3 1 0; tinfo t 1 "4" 4 0; } | gg $G/unknown-ggml-type.gguf 32
expect $G/unknown-ggml-type.gguf SNUG_UNSUPPORTED "tensor 't': ggml type 4 (unknown) is not one snug reads" \
    "a tensor's ggml type is unknown"
{ ghdr 3 1 0; tinfo t 1 "256" 19 0; } | gg $G/iquant-type.gguf 32
expect $G/iquant-type.gguf SNUG_UNSUPPORTED \
    "tensor 't': ggml type 19 (IQ1_S) is not one snug reads; it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K" \
    "a tensor of an i-quant type, which snug does not read"
{ ghdr 3 1 0; tinfo t 1 "33" 2 0; } | gg $G/not-whole-blocks.gguf 64
expect $G/not-whole-blocks.gguf SNUG_FORMAT \
    "tensor 't': first dimension 33 is not a multiple of the Q4_0 block size 32" \
    "the first dimension is not a multiple of the block size"
{ ghdr 3 1 0; tinfo t 1 "4" 0 4; } | gg $G/unaligned-offset.gguf 32
expect $G/unaligned-offset.gguf SNUG_FORMAT \
    "tensor 't': data offset 4 is not a multiple of the alignment 32" \
    "a data offset is not a multiple of the alignment"
{ ghdr 3 1 0; tinfo t 1 "64" 0 0; } | gg $G/data-past-end.gguf 32
expect $G/data-past-end.gguf SNUG_FORMAT \
    "tensor 't': data [0, +256) runs past the end of the file (32 bytes of data)" \
    "tensor data runs past the end of the file"
{ ghdr 3 2 0; tinfo t1 1 "16" 0 0; tinfo t2 1 "8" 0 32; } | gg $G/overlap.gguf 96
expect $G/overlap.gguf SNUG_FORMAT \
    "tensor 't2': data at 32 overlaps the previous tensor, which ends at 64" \
    "two tensors overlap"
{ ghdr 3 2 0; tinfo t 1 "4" 0 0; tinfo t 1 "4" 0 32; } | gg $G/duplicate-tensor.gguf 64
expect $G/duplicate-tensor.gguf SNUG_FORMAT "tensor 't' appears twice" \
    "a tensor name appears twice"
{ ghdr 3 1 0; tinfo '' 1 "4" 0 0; } | gg $G/tensor-empty-name.gguf 32
expect $G/tensor-empty-name.gguf SNUG_FORMAT "tensor 0 has an empty name" \
    "a tensor name is empty"
{ ghdr 3 1 0; tinfo "$(run_of t 1025)" 1 "4" 0 0; } | gg $G/tensor-name-too-long.gguf 32
expect $G/tensor-name-too-long.gguf SNUG_FORMAT \
    "a tensor name is 1025 bytes long; at most 1024 are accepted" \
    "a tensor name is longer than 1,024 bytes"
{ ghdr 3 1 0; gs t; u32 1; u64 4; u32 0; printf '\x00\x00\x00'; } >$G/tensor-info-truncated.gguf
expect $G/tensor-info-truncated.gguf SNUG_FORMAT \
    "a data offset needs 8 bytes at offset 49 but the file has 52" \
    "a tensor info runs past the end of the file"
{ ghdr 3 1 0; tinfo t 1 "0" 0 0; } >$G/data-section-past-end.gguf
expect $G/data-section-past-end.gguf SNUG_FORMAT \
    "the data section would start at 64, past the end of the file (57 bytes)" \
    "the file ends before the (aligned) data section starts"
{ ghdr 3 1 1; kv32 general.alignment 0; tinfo t 1 "4" 0 0; } | gg $G/alignment-0.gguf 32
expect $G/alignment-0.gguf SNUG_FORMAT "key 'general.alignment' must be a power of two, found 0" \
    "general.alignment is 0"
{ ghdr 3 1 1; kv32 general.alignment 3; tinfo t 1 "4" 0 0; } | gg $G/alignment-3.gguf 32
expect $G/alignment-3.gguf SNUG_FORMAT "key 'general.alignment' must be a power of two, found 3" \
    "general.alignment is not a power of two"
{ ghdr 3 1 1; gs general.alignment; u32 10; u64 32; tinfo t 1 "4" 0 0; } |
    gg $G/alignment-wrong-type.gguf 32
expect $G/alignment-wrong-type.gguf SNUG_FORMAT \
    "key 'general.alignment' must be a uint32, found a uint64" \
    "general.alignment is not a uint32"

# ---- config.json -----------------------------------------------------------
# cfg FILE KEY=VALUE...: a small valid Llama config with fields replaced
# (KEY=VALUE, VALUE as JSON), removed (KEY=) or added (a new KEY=VALUE).
cfg_keys=(architectures model_type hidden_act hidden_size intermediate_size num_hidden_layers
          num_attention_heads num_key_value_heads vocab_size max_position_embeddings
          rms_norm_eps rope_theta tie_word_embeddings torch_dtype bos_token_id eos_token_id)
declare -A cfg_base=(
    [architectures]='["LlamaForCausalLM"]' [model_type]='"llama"' [hidden_act]='"silu"'
    [hidden_size]=64 [intermediate_size]=172 [num_hidden_layers]=2 [num_attention_heads]=8
    [num_key_value_heads]=4 [vocab_size]=512 [max_position_embeddings]=512
    [rms_norm_eps]=1e-05 [rope_theta]=10000.0 [tie_word_embeddings]=true
    [torch_dtype]='"float32"' [bos_token_id]=1 [eos_token_id]=2)
cfg() {
    local file=$1 kv k sep='' extra=()
    shift
    declare -A v
    for k in "${cfg_keys[@]}"; do v[$k]=${cfg_base[$k]}; done
    for kv in "$@"; do
        k=${kv%%=*}
        [[ -v cfg_base[$k] ]] || extra+=("$k")
        v[$k]=${kv#*=}
    done
    {
        printf '{\n'
        for k in "${cfg_keys[@]}" "${extra[@]}"; do
            [[ -n ${v[$k]} ]] || continue
            printf '%s  "%s": %s' "$sep" "$k" "${v[$k]}"
            sep=$',\n'
        done
        printf '\n}\n'
    } >"$file"
}

C=config
cfg $C/unknown-architecture.json 'architectures=["GPT2LMHeadModel"]' model_type=
expect $C/unknown-architecture.json SNUG_UNSUPPORTED \
    "field 'architectures': 'GPT2LMHeadModel' is not supported; supported: LlamaForCausalLM (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2)" \
    "the architecture is not one snug runs (the message lists those it does)"
cfg $C/unknown-model-type.json architectures= 'model_type="gemma"'
expect $C/unknown-model-type.json SNUG_UNSUPPORTED \
    "field 'model_type': 'gemma' is not supported; supported: LlamaForCausalLM (llama)" \
    "the model_type is not one snug runs"
cfg $C/no-architecture.json architectures= model_type=
expect $C/no-architecture.json SNUG_FORMAT "neither 'architectures' nor 'model_type' is given" \
    "neither architectures nor model_type"
cfg $C/architectures-not-list.json 'architectures="LlamaForCausalLM"'
expect $C/architectures-not-list.json SNUG_FORMAT \
    "field 'architectures': expected a list of architecture names, found the string" \
    "architectures is not a list of names"
cfg $C/architecture-model-type-disagree.json 'model_type="qwen2"'
expect $C/architecture-model-type-disagree.json SNUG_FORMAT \
    "'architectures' says LlamaForCausalLM but 'model_type' says qwen2" \
    "architectures and model_type name different families"
cfg $C/hidden-act-not-silu.json 'hidden_act="gelu"'
expect $C/hidden-act-not-silu.json SNUG_UNSUPPORTED \
    "field 'hidden_act': 'gelu' is not supported by LlamaForCausalLM; expected silu" "hidden_act is not silu"
cfg $C/missing-hidden-size.json hidden_size=
expect $C/missing-hidden-size.json SNUG_FORMAT \
    "field 'hidden_size' is missing; expected an integer in [1, 1048576]" "hidden_size is missing"
cfg $C/hidden-size-wrong-type.json 'hidden_size="64"'
expect $C/hidden-size-wrong-type.json SNUG_FORMAT \
    "field 'hidden_size': expected an integer in [1, 1048576], found the string \"64\"" \
    "a size has the wrong JSON type"
cfg $C/layers-out-of-range.json num_hidden_layers=5000
expect $C/layers-out-of-range.json SNUG_FORMAT \
    "field 'num_hidden_layers': expected an integer in [1, 4096], found the integer 5000" \
    "a size is out of range"
cfg $C/rms-norm-eps-out-of-range.json rms_norm_eps=0.75
expect $C/rms-norm-eps-out-of-range.json SNUG_FORMAT \
    "field 'rms_norm_eps': expected a number in [1e-30, 0.5], found the number 0.75" \
    "a real number is out of range"
cfg $C/heads-not-dividing-hidden.json num_attention_heads=6 num_key_value_heads=2
expect $C/heads-not-dividing-hidden.json SNUG_FORMAT \
    "num_attention_heads 6 does not divide hidden_size 64 (and no head_dim is given)" \
    "num_attention_heads does not divide hidden_size"
cfg $C/kv-heads-not-dividing-heads.json num_key_value_heads=3
expect $C/kv-heads-not-dividing-heads.json SNUG_FORMAT \
    "num_key_value_heads 3 does not divide num_attention_heads 8" \
    "num_key_value_heads does not divide num_attention_heads"
cfg $C/odd-head-dim.json head_dim=7
expect $C/odd-head-dim.json SNUG_FORMAT "head_dim 7 must be even (rotary embeddings rotate pairs)" \
    "head_dim is odd"
cfg $C/attention-too-wide.json num_attention_heads=4096 num_key_value_heads=4096 head_dim=4096
expect $C/attention-too-wide.json SNUG_FORMAT \
    "num_attention_heads 4096 x head_dim 4096 is above the limit of 1048576" \
    "num_attention_heads x head_dim is above 2^20"
cfg $C/rope-scaling-not-object.json rope_scaling=2
expect $C/rope-scaling-not-object.json SNUG_FORMAT \
    "field 'rope_scaling': expected an object, found the integer 2" "rope_scaling is not an object"
cfg $C/rope-no-type.json 'rope_scaling={"factor": 2.0}'
expect $C/rope-no-type.json SNUG_FORMAT "field 'rope_scaling': no 'rope_type' (or 'type')" \
    "rope_scaling has no rope_type"
cfg $C/rope-unknown-type.json 'rope_scaling={"rope_type": "mrope", "factor": 2.0}'
expect $C/rope-unknown-type.json SNUG_UNSUPPORTED \
    "field 'rope_scaling': rope type 'mrope' is not supported" "the rope type is unknown"
cfg $C/rope-longrope-lengths.json 'rope_scaling={"rope_type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2, 3]}' \
    'original_max_position_embeddings=256'
expect $C/rope-longrope-lengths.json SNUG_FORMAT "short_factor has 2 factors, long_factor 3" \
    "LongRoPE's two lists differ in length"
cfg $C/rope-longrope-count.json 'rope_scaling={"rope_type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2]}' \
    'original_max_position_embeddings=256'
expect $C/rope-longrope-count.json SNUG_FORMAT "longrope: 2 short and long factors for 4 rotary frequencies" \
    "LongRoPE's lists are not one factor per rotary frequency"
cfg $C/rope-linear-no-factor.json 'rope_scaling={"rope_type": "linear"}'
expect $C/rope-linear-no-factor.json SNUG_FORMAT \
    "rope_scaling: field 'factor' is missing; expected a number in [1, 1e+06]" \
    "a scaled rope has no factor"
cfg $C/rope-llama3-no-high-freq.json \
    'rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0}'
expect $C/rope-llama3-no-high-freq.json SNUG_FORMAT \
    "rope_scaling: field 'high_freq_factor' is missing" "llama3 rope without high_freq_factor"
cfg $C/rope-llama3-no-original-max.json \
    'rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}'
expect $C/rope-llama3-no-original-max.json SNUG_FORMAT \
    "rope_scaling: field 'original_max_position_embeddings' is missing" \
    "llama3 rope without original_max_position_embeddings"
cfg $C/rope-llama3-low-not-below-high.json \
    'rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 4.0, "high_freq_factor": 4.0}'
expect $C/rope-llama3-low-not-below-high.json SNUG_FORMAT \
    "field 'rope_scaling': low_freq_factor 4 must be below high_freq_factor 4" \
    "llama3 rope with low_freq_factor >= high_freq_factor"
cfg $C/torch-dtype-unknown.json 'torch_dtype="int8"'
expect $C/torch-dtype-unknown.json SNUG_UNSUPPORTED \
    "field 'torch_dtype': 'int8' is not a weight type snug loads" \
    "torch_dtype is not bfloat16, float16 or float32"
cfg $C/mlp-bias.json mlp_bias=true
expect $C/mlp-bias.json SNUG_UNSUPPORTED "field 'mlp_bias': MLP biases are not supported" \
    "mlp_bias is true"
cfg $C/attention-bias-wrong-type.json 'attention_bias="yes"'
expect $C/attention-bias-wrong-type.json SNUG_FORMAT \
    "field 'attention_bias': expected true or false, found the string \"yes\"" \
    "a flag is not a boolean"
cfg $C/bos-out-of-vocab.json bos_token_id=512
expect $C/bos-out-of-vocab.json SNUG_FORMAT "bos_token_id 512 is not below vocab_size 512" \
    "bos_token_id is not a token of the vocabulary"
cfg $C/eos-out-of-vocab.json eos_token_id=600
expect $C/eos-out-of-vocab.json SNUG_FORMAT "eos_token_id 600 is not below vocab_size 512" \
    "eos_token_id is not a token of the vocabulary"
cfg $C/eos-list-bad-entry.json 'eos_token_id=[2, "</s>"]'
expect $C/eos-list-bad-entry.json SNUG_FORMAT \
    "field 'eos_token_id': entry 1: expected a token id, found the string \"</s>\"" \
    "an eos_token_id list holds a non-integer"
cfg $C/eos-list-too-long.json 'eos_token_id=[1, 2, 3, 4, 5, 6, 7, 8, 9]'
expect $C/eos-list-too-long.json SNUG_FORMAT \
    "field 'eos_token_id': expected a token id or a list of at most 8, found an array of 9" \
    "more than 8 eos_token_ids"
printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64,\n' >$C/not-json.json
expect $C/not-json.json SNUG_FORMAT "not valid JSON: line 2" "the file is not JSON"
printf '[{"architectures": ["LlamaForCausalLM"]}]\n' >$C/top-level-array.json
expect $C/top-level-array.json SNUG_FORMAT "expected a JSON object at the top, found an array of 1" \
    "the file is a JSON array, not an object"

# ---- model.safetensors.index.json ------------------------------------------
I=index
SHARD=model-00001-of-00002.safetensors
printf '{"metadata": {"total_size": 4}}\n' >$I/missing-weight-map.json
expect $I/missing-weight-map.json SNUG_FORMAT "field 'weight_map' is missing" \
    "weight_map is missing"
printf '{"weight_map": ["%s"]}\n' $SHARD >$I/weight-map-not-object.json
expect $I/weight-map-not-object.json SNUG_FORMAT \
    "field 'weight_map': expected an object mapping tensor names to shard files, found an array of 1" \
    "weight_map is not an object"
printf '{"metadata": {"total_size": 0}, "weight_map": {}}\n' >$I/weight-map-empty.json
expect $I/weight-map-empty.json SNUG_FORMAT "field 'weight_map' is empty" "weight_map is empty"
printf '{"weight_map": {"a": "%s", "b": 2}}\n' $SHARD >$I/file-not-string.json
expect $I/file-not-string.json SNUG_FORMAT \
    "weight_map: tensor 'b': expected a file name, found the integer 2" \
    "a file name is not a string"
printf '{"weight_map": {"a": "/tmp/%s"}}\n' $SHARD >$I/file-absolute.json
expect $I/file-absolute.json SNUG_FORMAT "file name '/tmp/$SHARD' is an absolute path" \
    "a file name is an absolute path"
printf '{"weight_map": {"a": ".."}}\n' >$I/file-dot-dot.json
expect $I/file-dot-dot.json SNUG_FORMAT "file name '..' names a directory" \
    "a file name is \"..\""
printf '{"weight_map": {"a": "shards/%s"}}\n' $SHARD >$I/file-with-slash.json
expect $I/file-with-slash.json SNUG_FORMAT \
    "file name 'shards/$SHARD' contains a path separator" "a file name holds a '/'"
printf '{"weight_map": {"a": ""}}\n' >$I/file-empty.json
expect $I/file-empty.json SNUG_FORMAT "file name '' is empty" "a file name is empty"
printf '{"weight_map": {"a": "%s.safetensors"}}\n' "$(run_of m 245)" >$I/file-too-long.json
expect $I/file-too-long.json SNUG_FORMAT "is longer than 255 bytes" \
    "a file name is longer than 255 bytes"
printf '{"weight_map": {"": "%s"}}\n' $SHARD >$I/tensor-name-empty.json
expect $I/tensor-name-empty.json SNUG_FORMAT "weight_map: tensor name of 0 bytes; expected 1 to 1024" \
    "a tensor name is empty"
printf '{"weight_map": {"%s": "%s"}}\n' "$(run_of n 1025)" $SHARD >$I/tensor-name-too-long.json
expect $I/tensor-name-too-long.json SNUG_FORMAT \
    "weight_map: tensor name of 1025 bytes; expected 1 to 1024" \
    "a tensor name is longer than 1,024 bytes"
printf '{"weight_map": {"a": "%s", "a": "%s"}}\n' $SHARD $SHARD >$I/duplicate-tensor.json
expect $I/duplicate-tensor.json SNUG_FORMAT "duplicate object key" "a tensor name appears twice"
printf '{"metadata": [], "weight_map": {"a": "%s"}}\n' $SHARD >$I/metadata-not-object.json
expect $I/metadata-not-object.json SNUG_FORMAT \
    "field 'metadata': expected an object, found an array of 0" "metadata is not an object"
printf '{"metadata": {"total_size": -4}, "weight_map": {"a": "%s"}}\n' $SHARD \
    >$I/total-size-negative.json
expect $I/total-size-negative.json SNUG_FORMAT \
    "metadata: field 'total_size': expected an integer in [0, 9223372036854775807], found the integer -4" \
    "metadata.total_size is negative"

# ---- model directories -----------------------------------------------------
# ckdir CASE: a directory with a small valid config.json; shard CASE FILE
# TENSOR...: a safetensors file of F32 [1] tensors; index CASE TENSOR=FILE...
ckdir() {
    mkdir -p "checkpoint/$1"
    printf '{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": 64,\n  "intermediate_size": 172,\n  "num_hidden_layers": 1,\n  "num_attention_heads": 8,\n  "vocab_size": 512\n}\n' \
        >"checkpoint/$1/config.json"
}
shard() {
    local dir=$1 file=$2 hdr='' off=0 t
    shift 2
    for t in "$@"; do
        hdr+="${hdr:+,}$(ent "$t" F32 1 $off $((off + 4)))"
        off=$((off + 4))
    done
    st "checkpoint/$dir/$file" "{$hdr}" $off
}
index() {
    local dir=$1 map='' kv
    shift
    for kv in "$@"; do map+="${map:+, }\"${kv%%=*}\": \"${kv#*=}\""; done
    printf '{"metadata": {"total_size": %d}, "weight_map": {%s}}\n' $((4 * $#)) "$map" \
        >"checkpoint/$dir/model.safetensors.index.json"
}
S1=model-00001-of-00002.safetensors
S2=model-00002-of-00002.safetensors
K=checkpoint

ckdir shard-missing
index shard-missing a=$S1 b=$S2
shard shard-missing $S1 a
expect $K/shard-missing SNUG_FORMAT "names shard '$S2', which is not a file in" \
    "the index names a shard that is not in the directory"
ckdir tensor-not-in-index
index tensor-not-in-index a=$S1
shard tensor-not-in-index $S1 a extra
expect $K/tensor-not-in-index SNUG_FORMAT \
    "shard '$S1' holds tensor 'extra', which the index does not list" \
    "a shard holds a tensor the index does not list"
ckdir tensor-in-other-shard
index tensor-in-other-shard a=$S1 b=$S2
shard tensor-in-other-shard $S1 a b
shard tensor-in-other-shard $S2 b
expect $K/tensor-in-other-shard SNUG_FORMAT \
    "shard '$S1' holds tensor 'b', which the index assigns to another shard" \
    "a shard holds a tensor the index assigns to another shard"
ckdir tensor-missing-from-shard
index tensor-missing-from-shard a=$S1 b=$S1
shard tensor-missing-from-shard $S1 a
expect $K/tensor-missing-from-shard SNUG_FORMAT \
    "lists tensor 'b' in shard '$S1', which does not hold it" \
    "the index lists a tensor its shard does not hold"
ckdir no-model-files
expect $K/no-model-files SNUG_FORMAT \
    "holds neither model.safetensors nor model.safetensors.index.json" \
    "neither model.safetensors nor an index"
mkdir -p $K/no-config
st $K/no-config/model.safetensors "{$(ent a F32 1 0 4)}" 4
expect $K/no-config SNUG_IO "config.json: cannot open" "no config.json"
ckdir bad-shard
index bad-shard a=$S1
st $K/bad-shard/$S1 "{$(ent a F32 1 0 4)}" 7
expect $K/bad-shard SNUG_FORMAT "$S1: 3 trailing bytes after the last tensor" \
    "a shard breaks a safetensors rule (the message names the shard)"

# ---- README.md -------------------------------------------------------------
{
    cat <<'EOF'
# Malformed files

Hand-made files that break one rule each of snug's readers of untrusted
bytes: safetensors files, GGUF files, config.json, the shard index
(model.safetensors.index.json) and whole model directories. Each must be
rejected with its own message; `EXPECT` lists, one per line and separated
by tabs, the path (relative to this directory), the expected status and a
substring of the expected message. `tests/test_malformed.c` runs every
entry through its reader (model directories through
`snug_checkpoint_open`) and checks the status, the message, that the
message names the file, that no two entries share a message, that nothing
leaks, and that every file here is listed.

Everything here is written by `make-corpus.sh` (bash and coreutils only);
edit that script and re-run it rather than editing files by hand. This
README is written by it too.

| path | status | rule broken |
|---|---|---|
EOF
    printf '%s\n' "${rows[@]}"
} >README.md
echo "make-corpus.sh: wrote $(wc -l <EXPECT) cases"
