# bytes.sh: little-endian binary writers for the test-data generators
# (tests/fuzz/make-seeds.sh, tests/data/malformed/make-corpus.sh). Source it.
# Each writes to stdout; u64 takes any 64-bit value bash can hold
# (0xffffffffffffffff too: the bytes come from shifts).
u8() { printf "$(printf '\\x%02x' $(($1 & 255)))"; }
u32() {
    local n=$(($1))
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n & 255)) $((n >> 8 & 255)) \
        $((n >> 16 & 255)) $((n >> 24 & 255)))"
}
u64() {
    local n=$(($1))
    u32 $((n & 0xffffffff))
    u32 $((n >> 32 & 0xffffffff))
}
zeros() { head -c "$1" /dev/zero; }
# run_of C N: N copies of the character C (for long names).
run_of() { local s; printf -v s '%*s' "$2" ''; printf '%s' "${s// /$1}"; }
# pat N: N bytes of a fixed pattern (so that read-back checks see data).
pat() {
    local s='' b i
    for ((i = 0; i < $1; i++)); do
        printf -v b '\\x%02x' $(((i * 37 + 11) & 255))
        s+=$b
    done
    printf "$s"
}
