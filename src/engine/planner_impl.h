/*
 * planner_impl.h: what snug_planner_open makes (planner.h), private to
 * planner.c; the engine is handed its parts (snug_planner_parts). Tests
 * read it to check the plan against what was made.
 */
#ifndef SNUG_PLANNER_IMPL_H
#define SNUG_PLANNER_IMPL_H

#include "blocks.h"
#include "dist/stepper.h"
#include "formats/checkpoint.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"
#include "planner.h"
#include "serving.h"
#include "tokenizer/tokenizer.h"

/* Everything serving runs on, planned and made. */
struct snug_planned {
    snug_checkpoint *ck;
    snug_weights *weights;
    snug_tokenizer *tok;           /* NULL when the directory has none */
    snug_vocab_trie *trie;         /* the tokenizer's token bytes, for constrained decoding */
    snug_model *model;
    snug_serving_state serving;
    snug_kvcache kv;
    snug_block_pool pool;          /* the cache's blocks (prefix caching unless turned off) */
    snug_kvcache wkv;              /* the window group's cache (kv.window points here), and ... */
    snug_block_pool wpool;         /* ... its blocks; both zero when there is none */
    snug_stepper *stepper;         /* every step goes through it (one rank or many) */
    snug_checkpoint *dck;          /* the draft model's checkpoint (opts.draft_dir), ... */
    snug_tokenizer *dtok;          /* ... its tokenizer (compared with tok, then freed) ... */
    snug_weights *dweights;        /* ... its weights, ... */
    snug_model *dmodel;            /* ... the model on them and ... */
    snug_kvcache dkv;              /* ... its cache: kv's blocks, its layers; all zero: none */
    snug_plan_report report;
    /* the KV cache made resident after ready (opts.populate_after_ready) */
    int32_t kv_resident;           /* blocks 0 .. kv_resident - 1 are resident */
    int32_t populate_group;        /* blocks made resident per call */
    double populate_seconds;       /* spent in those calls so far */
    bool populate_failed;          /* the system would not back the next group: given up */
    snug_error populate_err;       /* then why */
    double t_start;                /* when the plan began, for on_phase */
    void (*on_phase)(void *ctx, const char *phase, double seconds); /* opts' */
    void *on_phase_ctx;
};

#endif /* SNUG_PLANNER_IMPL_H */
