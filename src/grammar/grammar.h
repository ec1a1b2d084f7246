/*
 * grammar.h: grammars for constrained decoding, compiled to rules over
 * bytes. snug_grammar_parse_gbnf reads GBNF (llama.cpp's grammar text:
 * `name ::= alternatives`, "strings", [classes], [^negated], `.`, groups,
 * `*` `+` `?` `{m}` `{m,}` `{m,n}`, # comments) into a snug_grammar that
 * matcher.h walks a byte at a time.
 *
 * A compiled grammar is rules; a rule is alternatives, each a sequence of
 * elements ended by SNUG_GE_ALT (another alternative follows) or
 * SNUG_GE_END (the rule's last). An element is a set of bytes or a
 * reference to a rule: text is matched as its UTF-8 bytes, a class over
 * code points becomes alternatives of byte-set sequences (its UTF-8
 * ranges), a repetition a rule of its own (right-recursive, which the
 * matcher runs in constant depth). Grammars whose rules can reach
 * themselves before reading a byte (left recursion) are refused, as
 * llama.cpp refuses them. Alternatives that begin with the same element
 * are merged (a list of literals becomes a trie), and a grammar in which
 * some place begins more than SNUG_GRAMMAR_WIDTH_MAX alternatives at once
 * is refused: a matcher of fixed memory could not follow it.
 */
#ifndef SNUG_GRAMMAR_H
#define SNUG_GRAMMAR_H

#include "base/common.h"

/* The limits of a grammar, each checked before the work it bounds (the
 * README lists them beside the fields that take grammars). */
enum {
    SNUG_GRAMMAR_TEXT_MAX = 2 << 20,  /* bytes of GBNF text */
    SNUG_GRAMMAR_ELEMS_MAX = 1 << 20, /* elements of a compiled grammar */
    SNUG_GRAMMAR_RULES_MAX = 1 << 16, /* rules, the made ones (groups, repetitions) counted */
    SNUG_GRAMMAR_REPEAT_MAX = 1024,   /* the largest m and n of {m,n} */
    SNUG_GRAMMAR_NAME_MAX = 128,      /* bytes of a rule name */
    SNUG_GRAMMAR_NEST_MAX = 128,      /* groups inside groups */
    SNUG_GRAMMAR_WIDTH_MAX = 56,      /* alternatives a place in the grammar can begin at once (a
                                       * matcher follows each as a stack: see matcher.h) */
    SNUG_GRAMMAR_BYTES_MAX = 32 << 20 /* memory compiling one grammar may take */
};

typedef enum snug_gelem_kind {
    SNUG_GE_END = 0, /* the end of a rule's last alternative */
    SNUG_GE_ALT,     /* the end of an alternative; another follows */
    SNUG_GE_REF,     /* value: a rule */
    SNUG_GE_SET      /* value: a byte set (snug_grammar.sets) */
} snug_gelem_kind;

typedef struct snug_gelem {
    int32_t kind; /* snug_gelem_kind */
    int32_t value;
} snug_gelem;

/* 256 bits: byte b is in set s when s.bits[b / 32] >> (b % 32) & 1. */
typedef struct snug_byteset {
    uint32_t bits[8];
} snug_byteset;

typedef struct snug_grammar {
    int32_t n_rules;
    int32_t root;           /* the rule a match starts from */
    const int32_t *start;   /* (n_rules): each rule's first element */
    int32_t n_elems;
    const snug_gelem *elems; /* (n_elems) */
    const int32_t *alt_first; /* (n_rules + 1): rule r's alternatives are alts[alt_first[r] ..
                               * alt_first[r + 1]) */
    const int32_t *alts;      /* each alternative's first element */
    int32_t n_sets;
    const snug_byteset *sets; /* (n_sets) */
    size_t bytes;           /* what the grammar holds, this struct included */
} snug_grammar;

/* Parses len bytes of GBNF text whose start rule is named root (NULL:
 * "root") into *out (the caller frees it with snug_grammar_free). what
 * names the text in messages ("grammar", "response_format"). Fails with
 * SNUG_INVALID and a message "what: line L, column C: ..." naming the
 * place and what was expected there (an undefined or twice-defined rule, a
 * left-recursive rule or repetition of something that can be empty, text
 * that is not UTF-8, a place too wide, the limits above); SNUG_NOMEM when
 * the allocator refuses. Its time and memory are linear in the text (n log
 * n for the names).
 * Nothing is held on failure and *out is NULL. */
snug_status snug_grammar_parse_gbnf(const char *text, size_t len, const char *root, const char *what,
                                    snug_grammar **out, snug_error *err);

/* Frees g (NULL is a no-op). */
void snug_grammar_free(snug_grammar *g);

/* Whether a and b are the same grammar: the same rules, elements and byte
 * sets (so every matcher state means the same in both). Pure; linear in
 * their size. */
bool snug_grammar_equal(const snug_grammar *a, const snug_grammar *b);

/* A keyed hash (SipHash-2-4 under key) of all that g is: equal grammars
 * hash alike; without the key nobody can choose two that collide. Pure;
 * linear in g's size. */
uint64_t snug_grammar_hash(const snug_grammar *g, const uint64_t key[2]);

/* Whether byte b is in set s. Pure. */
static inline bool snug_byteset_has(const snug_byteset *s, uint8_t b)
{
    return (s->bits[b >> 5] >> (b & 31)) & 1u;
}

#endif /* SNUG_GRAMMAR_H */
