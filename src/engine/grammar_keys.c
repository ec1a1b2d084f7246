/*
 * grammar_keys.c: the table of grammar_keys.h, searched whole (a few
 * hundred entries at most, looked at once a sequence).
 */
#include "grammar_keys.h"

#include <string.h>

size_t snug_grammar_keys_bytes(int32_t cap) { return (size_t)cap * sizeof(snug_grammar_key); }

void snug_grammar_keys_init(snug_grammar_keys *t, void *mem, int32_t cap)
{
    *t = (snug_grammar_keys){.e = mem, .cap = cap};
    memset(mem, 0, snug_grammar_keys_bytes(cap));
}

static snug_grammar_key *find(snug_grammar_keys *t, uint64_t key)
{
    for (int32_t i = 0; i < t->cap; i++)
        if (t->e[i].used && t->e[i].key == key) return &t->e[i];
    return NULL;
}

/* A free entry, or the oldest retired one (its key's masks to drop); NULL
 * when every entry is live. */
static snug_grammar_key *room(snug_grammar_keys *t, bool *dropped, uint64_t *dropped_key)
{
    snug_grammar_key *oldest = NULL;
    for (int32_t i = 0; i < t->cap; i++) {
        if (!t->e[i].used) return &t->e[i];
        if (t->e[i].holders == 0 && (!oldest || t->e[i].last_use < oldest->last_use)) oldest = &t->e[i];
    }
    if (oldest) *dropped = true, *dropped_key = oldest->key;
    return oldest;
}

bool snug_grammar_keys_take(snug_grammar_keys *t, uint64_t h, uint64_t d, const snug_grammar *g, uint64_t *key,
                            bool *dropped, uint64_t *dropped_key)
{
    *dropped = false;
    for (int32_t tries = 0; tries <= t->cap; tries++, h++) {
        snug_grammar_key *k = find(t, h);
        bool same = k && (k->holders > 0 ? snug_grammar_equal(k->g, g) : k->digest == d);
        if (k && !same) { /* another grammar's key: the next one */
            t->collisions += tries == 0;
            continue;
        }
        if (!k) {
            if (!(k = room(t, dropped, dropped_key))) return false;
            *k = (snug_grammar_key){.key = h, .digest = d, .used = true};
        }
        if (k->holders++ == 0) k->g = g;
        k->last_use = ++t->clock;
        *key = h;
        return true;
    }
    return false;
}

void snug_grammar_keys_release(snug_grammar_keys *t, uint64_t key, const snug_grammar *g,
                               const snug_grammar *other)
{
    snug_grammar_key *k = find(t, key);
    SNUG_ASSERT(k != NULL && k->holders > 0);
    k->last_use = ++t->clock;
    if (--k->holders == 0) k->g = NULL;
    else if (k->g == g) k->g = other;
    SNUG_ASSERT(k->holders == 0 || k->g != NULL);
}
