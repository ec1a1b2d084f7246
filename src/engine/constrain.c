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

static size_t contexts_bytes(int32_t n_vocab)
{
    return snug_ctxmask_cache_bytes(SNUG_CONSTRAIN_CONTEXTS, n_vocab, SNUG_CONSTRAIN_FORM_INTS, SNUG_CONSTRAIN_UNSURE);
}

/* The parts of the shared memory in order (snug_constrainer_attach carves
 * them so): the mask, the walk's mask, the walk's scratch, the state
 * cache, the contexts' cache, the walked state, the check's stack, two
 * forms, the form's scratch, the unsure list, the mask made by the walk,
 * then a token's bytes. */
enum { N_PARTS = 12 };

static void parts(int32_t n_vocab, size_t max_token_bytes, size_t part[N_PARTS])
{
    size_t form = SNUG_CONSTRAIN_FORM_INTS * sizeof(int32_t);
    size_t p[N_PARTS] = {mask_bytes(n_vocab), mask_bytes(n_vocab), scratch_bytes(max_token_bytes),
                         cache_bytes(n_vocab), contexts_bytes(n_vocab), snug_constrain_seq_bytes(),
                         snug_constrain_seq_bytes(), form, form, snug_ctx_form_scratch_bytes(),
                         SNUG_CONSTRAIN_UNSURE * sizeof(int32_t), mask_bytes(n_vocab)};
    for (int k = 0; k < N_PARTS; k++) part[k] = snug_round_up(p[k], SNUG_MEM_ALIGN);
}

size_t snug_constrain_bytes(int32_t n_vocab, size_t max_token_bytes)
{
    size_t part[N_PARTS], total = SNUG_MAX(max_token_bytes, (size_t)1);
    parts(n_vocab, max_token_bytes, part);
    for (int k = 0; k < N_PARTS; k++) total += part[k];
    return total;
}

size_t snug_constrain_seq_bytes(void) { return snug_gmatch_bytes(SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH); }

void snug_constrainer_attach(snug_constrainer *c, void *mem, int32_t n_vocab, size_t max_token_bytes)
{
    size_t part[N_PARTS];
    parts(n_vocab, max_token_bytes, part);
    char *at[N_PARTS + 1] = {mem};
    for (int k = 0; k < N_PARTS; k++) at[k + 1] = at[k] + part[k];
    *c = (snug_constrainer){.n_vocab = n_vocab, .mask = (uint32_t *)(void *)at[0],
                            .walk_mask = (uint32_t *)(void *)at[1], .scratch = at[2], .walk_state_mem = at[5],
                            .walk_form = (int32_t *)(void *)at[7],
                            .ctx_scratch = {.form = (int32_t *)(void *)at[8], .form_cap = SNUG_CONSTRAIN_FORM_INTS,
                                            .form_mem = at[9], .check_mem = at[6], .walk_mem = at[2],
                                            .walk_mask = (uint32_t *)(void *)at[1],
                                            .unsure = (int32_t *)(void *)at[10],
                                            .unsure_cap = SNUG_CONSTRAIN_UNSURE,
                                            .unsure_bytes_cap = SNUG_CONSTRAIN_UNSURE_BYTES},
                            .walk_made = (uint32_t *)(void *)at[11],
                            .token_text = (uint8_t *)at[12],
                            .token_cap = max_token_bytes, .walk_owner = -1};
    snug_tokmask_cache_init(&c->cache, at[3], SNUG_CONSTRAIN_CACHE, n_vocab, SNUG_CONSTRAIN_STATE_INTS);
    snug_ctxmask_cache_init(&c->contexts, at[4], SNUG_CONSTRAIN_CONTEXTS, n_vocab, SNUG_CONSTRAIN_FORM_INTS,
                            SNUG_CONSTRAIN_UNSURE);
}

/* ---- masks made from contexts (grammar/ctxmask.h) --------------------------------- */

/* Whether m's next byte may be most bytes: its mask is then made from its
 * contexts. */
static bool state_is_wide(const snug_gmatch *m)
{
    snug_byteset next;
    snug_gmatch_next_bytes(m, &next);
    int32_t n = 0;
    for (int k = 0; k < 8; k++) n += __builtin_popcount(next.bits[k]);
    return n >= SNUG_CONSTRAIN_WIDE_BYTES;
}

/* m's mask from its contexts into mask (snug_ctxmask_compose), for a wide
 * state, trying at most SNUG_CONSTRAIN_COMPOSE_BYTES of unsure tokens'
 * bytes; SNUG_CTX_NOT for another state. */
static int32_t compose(snug_constrainer *c, const snug_gmatch *m, uint32_t *mask)
{
    if (!state_is_wide(m)) return SNUG_CTX_NOT;
    int32_t missing;
    return snug_ctxmask_compose(&c->contexts, c->trie, m, &c->ctx_scratch, SNUG_CONSTRAIN_COMPOSE_BYTES, mask,
                                &missing);
}

/* What walk_next did. */
typedef enum walk_part { PART_DONE, PART_WALKING, PART_OUT_OF_TIME } walk_part;

/* The walk's next part for c->walk_state: its stacks' contexts added to
 * c->walk_made from stack c->walk_stack on until the clock passes deadline
 * (<= 0: none), the mask cached when all are (PART_DONE); or a walk begun
 * of the next stack's context not cached, or of the state whole (not
 * wide, or a context too large or too wide). */
static walk_part walk_next(snug_constrainer *c, double deadline)
{
    const snug_gmatch *m = &c->walk_state;
    int32_t r = c->walk_stack == 0 && !state_is_wide(m) ? SNUG_CTX_NOT : 0;
    while (r == 0 && c->walk_stack < m->n) {
        r = snug_ctxmask_add(&c->contexts, c->trie, m, c->walk_stack, &c->ctx_scratch, NULL, c->walk_made);
        if (r == 0 && ++c->walk_stack < m->n && deadline > 0 && snug_now_seconds() >= deadline)
            return PART_OUT_OF_TIME;
    }
    if (r == 0) {
        snug_tokmask_cache_put(&c->cache, c->walk_key, m, c->walk_made, snug_ctxmask_count(c->walk_made, c->n_vocab));
        c->composed++;
        return PART_DONE;
    }
    if (r == SNUG_CTX_MISSING) {
        c->walk_form_len = snug_ctxmask_walk_begin(&c->walk, c->trie, m, c->walk_stack, &c->ctx_scratch, c->walk_form);
    } else {
        snug_tokmask_walk_begin(&c->walk, c->trie, m, c->scratch, c->walk_mask);
    }
    c->walk_context = r == SNUG_CTX_MISSING;
    c->walk_begun = true;
    return PART_WALKING;
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
    if (!mask && (allowed = compose(c, m, c->mask)) >= 0) {
        snug_tokmask_cache_put(&c->cache, key, m, c->mask, allowed);
        c->composed++;
        mask = c->mask;
    }
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
    if (snug_tokmask_cache_get(&c->cache, key, m, NULL)) return true;
    int32_t allowed = compose(c, m, c->mask);
    if (allowed < 0) return false;
    snug_tokmask_cache_put(&c->cache, key, m, c->mask, allowed);
    c->composed++;
    return true;
}

void snug_constrain_walk_start(snug_constrainer *c, uint64_t key, const snug_gmatch *m, int32_t owner,
                               uint32_t gen)
{
    snug_constrain_walk_abandon(c);
    snug_gmatch_clone(&c->walk_state, c->walk_state_mem, m);
    memset(c->walk_made, 0, mask_bytes(c->n_vocab));
    c->walking = true, c->walk_begun = false, c->walk_stack = 0;
    c->walk_key = key, c->walk_owner = owner, c->walk_gen = gen;
}

bool snug_constrain_walk_continue(snug_constrainer *c, double deadline)
{
    if (!c->walking) return true;
    double t0 = snug_now_seconds();
    walk_part part = PART_WALKING;
    for (;;) {
        if (c->walk_begun) {
            if (!snug_tokmask_walk_run(&c->walk, deadline)) break;
            c->walks++;
            c->walk_begun = false;
            if (!c->walk_context) { /* the state whole */
                snug_tokmask_cache_put(&c->cache, c->walk_key, &c->walk_state, c->walk_mask, c->walk.allowed);
                part = PART_DONE;
                break;
            }
            if (snug_ctxmask_walk_end(&c->contexts, c->trie, &c->walk_state, c->walk_stack, &c->walk, &c->ctx_scratch,
                                      c->walk_form, c->walk_form_len, c->walk_made) != 0) {
                /* too wide to make masks from: the state whole */
                snug_tokmask_walk_begin(&c->walk, c->trie, &c->walk_state, c->scratch, c->walk_mask);
                c->walk_context = false, c->walk_begun = true;
                continue;
            }
            c->walk_stack++;
            if (deadline > 0 && snug_now_seconds() >= deadline) break;
        }
        if ((part = walk_next(c, deadline)) != PART_WALKING) break;
    }
    if (part == PART_DONE) c->walking = false, c->walk_owner = -1;
    c->walk_seconds += snug_now_seconds() - t0;
    return part == PART_DONE;
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
