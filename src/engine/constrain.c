/*
 * constrain.c: masks and the vocabulary's trie for constrained decoding
 * (constrain.h).
 */
#include "constrain.h"

#include "base/mem.h"

#include <math.h>
#include <string.h>

static size_t mask_bytes(int32_t n_vocab) { return ((size_t)n_vocab + 31) / 32 * sizeof(uint32_t); }

static size_t scratch_bytes(size_t max_token_bytes)
{
    return snug_tokmask_scratch_bytes((int32_t)max_token_bytes, SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH);
}

static size_t cache_bytes(int32_t n_vocab)
{
    return snug_tokmask_cache_bytes(SNUG_CONSTRAIN_CACHE, n_vocab, SNUG_CONSTRAIN_STATE_INTS);
}

size_t snug_constrain_bytes(int32_t n_vocab, size_t max_token_bytes)
{
    return 2 * snug_round_up(mask_bytes(n_vocab), SNUG_MEM_ALIGN) +
           snug_round_up(scratch_bytes(max_token_bytes), SNUG_MEM_ALIGN) +
           snug_round_up(cache_bytes(n_vocab), SNUG_MEM_ALIGN) + SNUG_MAX(max_token_bytes, (size_t)1);
}

size_t snug_constrain_seq_bytes(void) { return snug_gmatch_bytes(SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH); }

void snug_constrainer_attach(snug_constrainer *c, void *mem, int32_t n_vocab, size_t max_token_bytes)
{
    char *b = mem;
    size_t at_walk_mask = snug_round_up(mask_bytes(n_vocab), SNUG_MEM_ALIGN);
    size_t at_scratch = 2 * at_walk_mask;
    size_t at_cache = at_scratch + snug_round_up(scratch_bytes(max_token_bytes), SNUG_MEM_ALIGN);
    size_t at_text = at_cache + snug_round_up(cache_bytes(n_vocab), SNUG_MEM_ALIGN);
    *c = (snug_constrainer){.n_vocab = n_vocab, .mask = (uint32_t *)(void *)b,
                            .walk_mask = (uint32_t *)(void *)(b + at_walk_mask), .scratch = b + at_scratch,
                            .token_text = (uint8_t *)b + at_text, .token_cap = max_token_bytes, .walk_owner = -1};
    snug_tokmask_cache_init(&c->cache, b + at_cache, SNUG_CONSTRAIN_CACHE, n_vocab, SNUG_CONSTRAIN_STATE_INTS);
}

snug_status snug_constrain_trie_build(const snug_tokenizer *tok, int32_t n_vocab, snug_vocab_trie **out,
                                      snug_error *err)
{
    *out = NULL;
    snug_status st = SNUG_OK;
    size_t cap = snug_tokenizer_max_token_bytes(tok), total = 0;
    char *one = snug_mem_alloc(SNUG_MEM_OTHER, cap + 1, err);
    int32_t *lens = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *lens, err);
    const uint8_t **texts = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *texts, err);
    uint8_t *bytes = NULL;
    if (!one || !lens || !texts) goto nomem;
    for (int32_t i = 0; i < n_vocab; i++) { /* the lengths, then the bytes in one array */
        lens[i] = (int32_t)snug_tokenizer_token_bytes(tok, i, one, cap);
        total += (size_t)lens[i];
    }
    bytes = snug_mem_alloc(SNUG_MEM_OTHER, total ? total : 1, err);
    if (!bytes) goto nomem;
    for (size_t i = 0, at = 0; i < (size_t)n_vocab; at += (size_t)lens[i], i++) {
        memcpy(bytes + at, one, snug_tokenizer_token_bytes(tok, i, one, cap));
        texts[i] = bytes + at;
    }
    st = snug_vocab_trie_build(texts, lens, n_vocab, out, err);
    if (st != SNUG_OK) st = snug_error_prefix(err, st, "the vocabulary's trie: ");
    goto done;
nomem:
    st = snug_error_prefix(err, SNUG_NOMEM, "the vocabulary's trie: ");
done:
    snug_mem_free(bytes);
    snug_mem_free(texts);
    snug_mem_free(lens);
    snug_mem_free(one);
    return st;
}

int32_t snug_constrain_mask(snug_constrainer *c, uint64_t key, const snug_gmatch *m, const snug_stop_params *stop,
                            float *logits)
{
    int32_t allowed = 0;
    const uint32_t *mask = snug_tokmask_cache_get(&c->cache, key, m, &allowed);
    if (!mask) {
        snug_constrain_walk_abandon(c); /* the scratch is the whole walk's now */
        double t0 = snug_now_seconds();
        allowed = snug_tokmask_compute(c->trie, m, c->scratch, c->mask, NULL);
        snug_tokmask_cache_put(&c->cache, key, m, c->mask, allowed);
        c->walks++;
        c->walk_seconds += snug_now_seconds() - t0;
        mask = c->mask;
    }
    bool eos_ok = !stop->ignore_eos && snug_gmatch_accepting(m);
    float eos_logit[SNUG_STOP_EOS_MAX];
    for (int32_t i = 0; i < stop->n_eos; i++) {
        int32_t id = stop->eos_ids[i];
        eos_logit[i] = id >= 0 && id < c->n_vocab ? logits[id] : -INFINITY;
    }
    int32_t n = c->n_vocab;
    for (int32_t w = 0; w < (n + 31) / 32; w++) {
        uint32_t bits = mask[w];
        if (bits == ~0u) continue;
        for (int32_t i = w * 32, end = SNUG_MIN(n, w * 32 + 32); i < end; i++)
            if (!(bits >> (i & 31) & 1)) logits[i] = -INFINITY;
    }
    for (int32_t i = 0; eos_ok && i < stop->n_eos; i++) { /* each EOS id back, counted once */
        int32_t id = stop->eos_ids[i];
        if (id < 0 || id >= n || logits[id] == eos_logit[i]) continue;
        allowed += !(mask[id >> 5] >> (id & 31) & 1);
        logits[id] = eos_logit[i];
    }
    return allowed;
}

snug_status snug_constrain_check_start(const snug_grammar *g, snug_error *err)
{
    /* a sequence's matcher on the stack (33 KB): nothing allocated, so that submitting stays allocation-free */
    int32_t mem[2 * SNUG_CONSTRAIN_STACKS * (SNUG_CONSTRAIN_DEPTH + 1)];
    SNUG_ASSERT(sizeof mem == snug_constrain_seq_bytes());
    snug_gmatch m;
    snug_status st = snug_gmatch_start(&m, mem, SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH, g, err);
    return st == SNUG_OK ? st : snug_error_prefix(err, st, "its start is too ambiguous or too deep for a sequence's "
                                                        "matcher: ");
}

bool snug_constrain_cached(snug_constrainer *c, uint64_t key, const snug_gmatch *m)
{
    return snug_tokmask_cache_get(&c->cache, key, m, NULL) != NULL;
}

void snug_constrain_walk_start(snug_constrainer *c, uint64_t key, const snug_gmatch *m, int32_t owner,
                               uint32_t gen)
{
    snug_constrain_walk_abandon(c);
    double t0 = snug_now_seconds();
    snug_tokmask_walk_begin(&c->walk, c->trie, m, c->scratch, c->walk_mask);
    c->walking = true, c->walk_key = key, c->walk_owner = owner, c->walk_gen = gen;
    c->walk_seconds += snug_now_seconds() - t0;
}

bool snug_constrain_walk_continue(snug_constrainer *c, double deadline)
{
    if (!c->walking) return true;
    double t0 = snug_now_seconds();
    bool done = snug_tokmask_walk_run(&c->walk, deadline);
    if (done) {
        snug_tokmask_cache_put(&c->cache, c->walk_key, &c->walk.state[0], c->walk_mask, c->walk.allowed);
        c->walks++;
        c->walking = false, c->walk_owner = -1;
    }
    c->walk_seconds += snug_now_seconds() - t0;
    return done;
}

void snug_constrain_walk_abandon(snug_constrainer *c)
{
    if (!c->walking) return;
    c->walking = false, c->walk_owner = -1;
    c->walks_abandoned++;
}

bool snug_constrain_complete(const snug_gmatch *m)
{
    if (!snug_gmatch_accepting(m)) return false;
    snug_byteset next;
    snug_gmatch_next_bytes(m, &next);
    for (int i = 0; i < 8; i++)
        if (next.bits[i]) return false;
    return true;
}
