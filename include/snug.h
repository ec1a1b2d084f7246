/*
 * snug.h: the public C API of snug, an LLM inference engine that knows what
 * every byte of its memory is for.
 *
 * Conventions: functions that can fail return snug_status (SNUG_OK = 0,
 * negative codes for failures) and write a human-readable message naming the
 * file, the field and what was expected into a caller-supplied snug_error.
 * A snug_error pointer may be NULL when the caller does not want the message.
 * The library never calls exit().
 */
#ifndef SNUG_H
#define SNUG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release; the ranks of one tensor-parallel run must all be this one. */
#define SNUG_VERSION "0.5.0"

/* ---- status codes ---------------------------------------------------- */

typedef enum snug_status {
    SNUG_OK = 0,
    SNUG_NOMEM = -1,       /* an allocation failed or would pass the capacity */
    SNUG_IO = -2,          /* a read, write, open or stat failed */
    SNUG_FORMAT = -3,      /* a file's contents break a rule of its format */
    SNUG_INVALID = -4,     /* an argument or setting is out of range */
    SNUG_UNSUPPORTED = -5, /* valid input that snug does not handle */
    SNUG_INTERNAL = -6,    /* a broken invariant that was caught */
    SNUG_BUSY = -7         /* a bounded queue is full: try again later */
} snug_status;

/* Returns a constant name for a status code ("SNUG_NOMEM", ...); never NULL. */
const char *snug_status_str(snug_status status);

enum { SNUG_ERROR_MSG_BYTES = 1024 };

/* Where a failing call explains itself. status mirrors the return value. */
typedef struct snug_error {
    snug_status status;
    char msg[SNUG_ERROR_MSG_BYTES];
} snug_error;

/* ---- memory accounting ----------------------------------------------- */

/* What a block of memory is for. SNUG_MEM_TOTAL names the sum of all. */
typedef enum snug_mem_cat {
    SNUG_MEM_WEIGHTS = 0,
    SNUG_MEM_KV = 1,
    SNUG_MEM_ACTIVATIONS = 2,
    SNUG_MEM_STAGING = 3,
    SNUG_MEM_OTHER = 4,
    SNUG_MEM_N_CATS = 5,
    SNUG_MEM_TOTAL = SNUG_MEM_N_CATS
} snug_mem_cat;

/* Returns the category's name ("weights", "kv_cache", "activations",
 * "staging", "other", "total"); never NULL. */
const char *snug_mem_cat_name(snug_mem_cat cat);

/* Reads the bytes currently held and the peak since the last reset for one
 * category or SNUG_MEM_TOTAL. Either pointer may be NULL. When reset is true
 * the peak is set to the current value after it is read. */
void snug_mem_status(snug_mem_cat cat, size_t *cur, size_t *peak, bool reset);

/* Sets the capacity: an allocation that would take the total past it fails
 * with SNUG_NOMEM. SIZE_MAX (the initial value) means unlimited. */
void snug_mem_set_capacity(size_t bytes);

/* Returns the capacity set by snug_mem_set_capacity. */
size_t snug_mem_capacity(void);

/* Fault injection: the n-th allocation from now fails with SNUG_NOMEM (n = 1
 * is the next one). n = 0 turns injection off. Only that one allocation
 * fails; later ones succeed again. */
void snug_mem_fail_at(int64_t n);

/* The process as the kernel sees it: resident set and its high-water mark,
 * in bytes, from /proc/self/status. Both come from counters the kernel
 * keeps per CPU and folds in batches; the high-water mark is sampled from
 * them at unmaps and resets, so it can read tens of pages above or below
 * the true peak (seen: 360 KiB above right after a reset, 124 KiB below
 * after an unmap). A figure that must be right to the page comes from
 * snug_proc_rss_exact. */
snug_status snug_proc_mem(size_t *rss, size_t *hwm, snug_error *err);

/* The resident set, in bytes, to the page: the kernel walks the page tables
 * for it (/proc/self/smaps_rollup; costs about a millisecond per GiB held
 * in 4 KiB pages, far less in huge pages). Where that file is missing
 * (Linux before 4.14), the resident set of snug_proc_mem. */
snug_status snug_proc_rss_exact(size_t *rss, snug_error *err);

/* Resets the process high-water mark to the current resident set (writes 5
 * to /proc/self/clear_refs). Fails with SNUG_UNSUPPORTED and a message that
 * says so where the kernel does not allow it. */
snug_status snug_proc_hwm_reset(snug_error *err);

/* ---- element types ---------------------------------------------------- */

typedef enum snug_dtype {
    SNUG_DTYPE_NONE = 0,
    SNUG_DTYPE_F64, SNUG_DTYPE_F32, SNUG_DTYPE_F16, SNUG_DTYPE_BF16,
    SNUG_DTYPE_I64, SNUG_DTYPE_I32, SNUG_DTYPE_I16, SNUG_DTYPE_I8,
    SNUG_DTYPE_U64, SNUG_DTYPE_U32, SNUG_DTYPE_U16, SNUG_DTYPE_U8,
    SNUG_DTYPE_BOOL, SNUG_DTYPE_F8_E4M3, SNUG_DTYPE_F8_E5M2,
    SNUG_DTYPE_F8_E8M0, SNUG_DTYPE_C64,
    /* llama.cpp's quantized block formats (weights from GGUF files): blocks
     * of 32 or 256 elements with their scales, no size per element */
    SNUG_DTYPE_Q8_0, SNUG_DTYPE_Q4_0, SNUG_DTYPE_Q4_1, SNUG_DTYPE_Q5_0, SNUG_DTYPE_Q5_1,
    SNUG_DTYPE_Q2_K, SNUG_DTYPE_Q3_K, SNUG_DTYPE_Q4_K, SNUG_DTYPE_Q5_K, SNUG_DTYPE_Q6_K,
    /* the KV cache's 8-bit floats (--kv-cache-dtype fp8_e4m3, fp8_e5m2): blocks
     * of 32 FP8 values sharing a power-of-two scale (one E8M0 byte first), as
     * the OCP Microscaling formats MXFP8 */
    SNUG_DTYPE_MXFP8_E4M3, SNUG_DTYPE_MXFP8_E5M2,
    SNUG_DTYPE_COUNT
} snug_dtype;

/* ---- the engine: open, submit, stream, cancel, close -------------------
 *
 * One snug_llm serves one model: snug_llm_open plans its memory once (the
 * weights, the activations of the largest step, the serving state, and a
 * KV cache sized to the byte from what is left) and starts the step loop on
 * a thread of its own, which runs every submitted job in continuous batches.
 * Nothing the loop does allocates.
 *
 * A job (snug_job) is one prompt with n choices. Its memory (the job
 * itself, its prompt ids, the text buffer events point into) is taken at
 * submit from the job memory the plan kept back from the KV cache
 * (snug_llm_opts.job_memory) and given back by snug_job_free; polling,
 * waiting and cancelling allocate nothing. When the job memory is used up,
 * submit fails with SNUG_NOMEM until jobs are freed.
 *
 * Threads: every function may be called from any thread, and jobs may be
 * submitted and polled from several threads at once; one job is used by
 * one thread at a time.
 */

typedef struct snug_llm snug_llm;
typedef struct snug_job snug_job;

enum {
    SNUG_GEN_STOP_MAX = 4,                         /* stop strings per job */
    SNUG_LLM_JOB_MEMORY_DEFAULT = 4 * 1024 * 1024  /* bytes for jobs, 4 MiB */
};

/* How snug_llm_open plans. Fill with snug_llm_opts_default, then set
 * model_dir and what should differ; 0 in a size or count means the default
 * that its comment gives. */
typedef struct snug_llm_opts {
    const char *model_dir;          /* a checkpoint directory (config.json, weights,
                                     * tokenizer); read during open only */
    size_t memory_bytes;            /* the budget C; 0: a fraction of what the process may use */
    double memory_fraction;         /* in (0, 1]; 0: 0.9 (only without memory_bytes) */
    int64_t max_model_len;          /* positions per sequence; 0: the model's, or the
                                     * longest that fits the budget */
    int32_t max_num_seqs;           /* sequences at once; 0: 256 */
    int32_t max_num_batched_tokens; /* tokens per step; 0: max(2048, max_num_seqs) */
    size_t kv_cache_memory;         /* the KV cache's bytes; 0: what the budget leaves */
    size_t reserve;                 /* headroom kept out of the plan, never allocated */
    size_t job_memory;              /* bytes kept from the KV cache for jobs (part of the
                                     * reserve in the plan); 0: SNUG_LLM_JOB_MEMORY_DEFAULT */
    int32_t n_threads;              /* compute threads; 0: the CPUs the process may use (snug_cpu_count) */
    int32_t max_queue;              /* jobs waiting for a slot; 0: 1024 */
    bool no_prefix_caching;         /* false (the default): the KV cache keeps the blocks
                                     * it computed and a job whose prompt begins as an
                                     * earlier one's reuses them (snug_job_cached_tokens) */
    snug_dtype kv_cache_dtype;      /* the KV cache's: SNUG_DTYPE_NONE (0): BF16; F32, F16, BF16,
                                     * Q8_0, MXFP8_E4M3, MXFP8_E5M2 (these three: for a model
                                     * whose head_dim is a multiple of 32) */
    /* speculative decoding (exact: greedy jobs give the ids they give without it) */
    bool prompt_lookup;             /* drafts from n-grams of each sequence's own tokens, or ... */
    const char *draft_model;        /* ... a draft model of the same vocabulary (a directory or a
                                     * GGUF file; read while snug_llm_open runs); NULL: none */
    int32_t num_speculative_tokens; /* drafts a step verifies per sequence at most, 1 to 16; 0: 4 */
    int32_t draft_min;              /* ... and at least, whatever they cost (llama.cpp's
                                     * --draft-min); 0: as many as pay, by the steps' measured cost
                                     * and how the sequence's drafts have fared */
} snug_llm_opts;

/* Fills o with the defaults: every field 0 (model_dir NULL) but job_memory,
 * which is SNUG_LLM_JOB_MEMORY_DEFAULT. */
void snug_llm_opts_default(snug_llm_opts *o);

/* Loads and plans the model in o->model_dir and starts the step loop; *out
 * receives the handle (the caller's until snug_llm_close). While it is open
 * the allocator's capacity is the plan's, so that nothing takes the process
 * past the budget. Fails with SNUG_INVALID naming the field (no model_dir,
 * memory_bytes and memory_fraction both given, a fraction outside (0, 1],
 * a count out of range), with the loader's errors for a bad checkpoint
 * (naming the file), or with SNUG_NOMEM saying what would fit when the
 * budget is too small; then *out is NULL and nothing is held. */
snug_status snug_llm_open(const snug_llm_opts *o, snug_llm **out, snug_error *err);

/* Frees the jobs not yet freed (as snug_job_free: cancelled, then let go
 * of), stops the loop and frees the engine; the allocator's capacity is
 * lifted. NULL is ignored; llm and every job handle of it are invalid
 * afterwards. */
void snug_llm_close(snug_llm *llm);

/* How a job samples and when it stops. Fill with snug_gen_params_default. */
typedef struct snug_gen_params {
    float temperature;        /* >= 0; 0: greedy (the most likely token) */
    float top_p;              /* in (0, 1]; 1: off */
    int32_t top_k;            /* >= 0; 0: off */
    float min_p;              /* in [0, 1]; 0: off */
    float repetition_penalty; /* > 0; 1: off */
    float frequency_penalty;  /* in [-2, 2]; 0: off */
    float presence_penalty;   /* in [-2, 2]; 0: off */
    bool has_seed;            /* seed is used: the same seed gives the same tokens */
    uint64_t seed;            /* choice k draws from seed + k */
    int32_t max_tokens;       /* tokens per choice, >= 0; 0: up to max_model_len */
    bool ignore_eos;          /* end-of-sequence tokens are ordinary text */
    const char *stop[SNUG_GEN_STOP_MAX]; /* NUL-terminated UTF-8, 1 to 256 bytes each; copied
                                          * at submit. The text stops before the first one */
    int32_t n_stop;           /* how many of stop are used, 0 to SNUG_GEN_STOP_MAX */
    int32_t n;                /* choices, 1 to min(16, max_num_seqs) */
    /* Called on the engine's thread whenever the job has outputs to take
     * (then poll with snug_job_next), or NULL. It must return quickly: it
     * may not block, nor call any snug_ function (signal a condition, write
     * to a pipe). It is not called after snug_job_free returns. */
    void (*on_ready)(void *ctx);
    void *on_ready_ctx;
    const char *cache_salt;   /* NUL-terminated, or NULL: jobs share cached blocks only
                               * with jobs of the same salt (one per tenant) */
} snug_gen_params;

/* Fills p with the defaults: temperature 1, top_p 1, top_k 0, min_p 0,
 * repetition_penalty 1, no frequency or presence penalty, no seed,
 * max_tokens 0, EOS honoured, no stop strings, n 1, no callback. */
void snug_gen_params_default(snug_gen_params *p);

/* Tokenizes len bytes of prompt with the model's tokenizer (BOS added as
 * its configuration says; special-token text becomes those tokens) and
 * submits it with p (NULL: the defaults) as a new job into *out, which the
 * caller owns until snug_job_free. Fails, with *out NULL and nothing held,
 * with SNUG_INVALID and a message naming the field: a sampling parameter
 * out of range ("temperature: ...", "top_p: ...", ...), more than
 * SNUG_GEN_STOP_MAX stop strings or a bad one ("stop: ..."), "n: ...",
 * "max_tokens: ...", a prompt with no tokens, or a prompt that with
 * max_tokens does not fit max_model_len ("context_length_exceeded: ...");
 * with SNUG_UNSUPPORTED when the model has no tokenizer; with SNUG_NOMEM
 * when the job memory is used up (free finished jobs and try again); or
 * with SNUG_BUSY when max_queue jobs already wait or the engine failed. */
snug_status snug_llm_submit_text(snug_llm *llm, const char *prompt, size_t len,
                                 const snug_gen_params *p, snug_job **out, snug_error *err);

/* As snug_llm_submit_text, for a prompt of n token ids (copied; each in
 * [0, vocabulary size), else SNUG_INVALID naming the token). */
snug_status snug_llm_submit_ids(snug_llm *llm, const int32_t *ids, size_t n,
                                const snug_gen_params *p, snug_job **out, snug_error *err);

/* One output of a job, taken by snug_job_next. */
typedef struct snug_token_event {
    int32_t choice;            /* 0 .. n - 1 */
    int32_t token;             /* the token generated; -1 for an end without one */
    const char *text;          /* n_text bytes (not NUL-terminated) the token adds to the
                                * choice's text (held back while it could start a stop
                                * string); valid until the next call on the job */
    size_t n_text;
    const char *finish_reason; /* NULL while the choice goes on; its last event says
                                * why it ended: "stop" (EOS or a stop string),
                                * "length" (max_tokens or max_model_len), "abort" */
} snug_token_event;

/* Takes job's oldest output into *ev. Returns false when none is waiting
 * (wait with snug_job_wait, or for on_ready). The events of one choice come
 * in order; those of different choices interleave. Allocates nothing. */
bool snug_job_next(snug_llm *llm, snug_job *job, snug_token_event *ev);

/* Blocks until job has an output waiting or is done, or timeout_s seconds
 * pass (it may also return early). */
void snug_job_wait(snug_llm *llm, snug_job *job, double timeout_s);

/* True once every choice of job has ended and every event was taken. */
bool snug_job_done(snug_llm *llm, snug_job *job);

/* The prompt tokens of job whose keys and values came from the prefix
 * cache rather than being computed (whole blocks); 0 until its first event,
 * or with caching off. */
int64_t snug_job_cached_tokens(snug_llm *llm, snug_job *job);

/* Aborts job: its choices end within a step and their KV blocks are freed;
 * events not yet taken are dropped. The job stays the caller's (free it
 * with snug_job_free). Cancelling a done job does nothing. */
void snug_job_cancel(snug_llm *llm, snug_job *job);

/* Cancels job if it is not done, waits until the engine has let go of it,
 * and frees it, giving its bytes back to the job memory. NULL is ignored;
 * job and the text of its events are invalid afterwards. */
void snug_job_free(snug_llm *llm, snug_job *job);

/* The memory plan, in bytes: budget = weights + activations + serving_state
 * + untracked + reserve + kv_cache (+ less than one block left over). */
typedef struct snug_llm_plan_info {
    size_t budget;            /* C */
    size_t weights;           /* W: what the allocator charges the weights */
    size_t activations;       /* A: the largest step's peak */
    size_t serving_state;     /* S: per-sequence state, tokenizer, tables */
    size_t untracked;         /* U: what the process holds outside the allocator */
    size_t reserve;           /* R: the reserve, with the job memory */
    size_t job_memory;        /* of R, what jobs may allocate */
    size_t kv_cache;          /* K: what the allocator charges the KV cache */
    int64_t kv_blocks;
    int32_t block_size;       /* token positions per block */
    int64_t max_model_len;
    int32_t max_num_seqs;
} snug_llm_plan_info;

/* Fills *out with llm's plan. Cannot fail. */
void snug_llm_plan(snug_llm *llm, snug_llm_plan_info *out);

/* What the engine is doing and has done, read at one instant. */
typedef struct snug_llm_counters_info {
    int32_t running;          /* sequences in the batch */
    int32_t waiting;          /* sequences admitted but waiting (preempted, or no blocks) */
    int32_t queued;           /* jobs waiting for slots */
    int64_t preemptions;
    int64_t prompt_tokens;    /* admitted, once per choice */
    int64_t generation_tokens;
    int32_t kv_blocks_used, kv_blocks_total;
    int64_t requests_finished; /* jobs whose every choice ended and was taken */
    size_t job_memory_used;   /* bytes the live jobs hold, of job_memory */
    int64_t prefix_queried_tokens; /* prompt tokens looked up in the prefix cache, and ... */
    int64_t prefix_hit_tokens;     /* ... of those, found */
    int32_t kv_blocks_cached;      /* blocks holding a cached prefix (in use or evictable) */
    bool failed;              /* the step loop stopped on an error: submits are refused */
    int64_t spec_draft_tokens;     /* tokens drafted and verified (speculative decoding), and ... */
    int64_t spec_accepted_tokens;  /* ... of those, the ones kept */
} snug_llm_counters_info;

/* Fills *out with llm's counters. Cannot fail. */
void snug_llm_counters(snug_llm *llm, snug_llm_counters_info *out);

#ifdef __cplusplus
}
#endif

#endif /* SNUG_H */
