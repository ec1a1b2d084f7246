/*
 * mkgguf.c: writes a synthetic GGUF file (version 3, the preset's family as
 * llama.cpp names it) at the shapes of a preset of src/convert/mkmodel.h, laid out as an
 * unquantised llama.cpp export: the matrices in bf16 and the norm weights
 * in f32, since GGUF files keep norms in f32 whatever type the matrices
 * have. Importing it (`snug convert gguf`) therefore gives a checkpoint of
 * mixed dtypes, and loading that as bf16 converts only the norms: the case
 * bench/load measures (the loader's staging must be sized to those small
 * conversions, not to its cap) and tests/cli/cli.sh checks at the tiny shape.
 *
 *   build/bench/mkgguf OUT.gguf [--preset NAME] [--seed N] [--type T]
 *                      [--llama3-rope FACTOR,LOW,HIGH,ORIGINAL] [--vocab PATH]
 *       NAME: a preset (default llama-3.2-1b; any of mkmodel's: qwen3-1.7b,
 *       phi-3-mini, ...); N: the random seed (default 5); T: the
 *       matrices' type: bf16 (default), q8_0, q4_0, q6_k, or q4_k_m, which
 *       mixes them as llama.cpp's Q4_K_M does (matrix_type below),
 *       quantized by base/quant.h;
 *       --llama3-rope: also rope_freqs.weight, Llama 3.1's rope scaling as
 *       llama.cpp's converter writes it, one factor per rotary frequency i
 *       (wavelength w = 2 pi theta^(2i/d)): 1 where w < ORIGINAL / HIGH, FACTOR
 *       where w > ORIGINAL / LOW, else 1 / ((1 - s) / FACTOR + s) with s =
 *       (ORIGINAL / w - LOW) / (HIGH - LOW);
 *       --vocab: the tokenizer at PATH (a directory or a tokenizer file,
 *       of the preset's vocabulary size) as llama.cpp's tokenizer.ggml.*
 *       keys, so that the file is served on its own (snug serve FILE)
 *
 * What it writes: the keys of the family as llama.cpp's converter writes
 * them (formats/gguf_model.h: snug_gguf_model_keys; no vocabulary unless
 * --vocab gives one), then
 * the tensors the family's checkpoints hold (model/params.h) under
 * llama.cpp's names: token_embd.weight, per layer blk.L.* (attn_q/k/v or a
 * fused attn_qkv, biases, q/k norms, ffn_gate and ffn_up or a fused
 * ffn_up, ...), output_norm.weight and, for a preset without tied
 * embeddings, output.weight. Dimensions are listed innermost first (GGUF
 * order): a matrix of `rows` outputs and `cols` inputs is [cols, rows].
 * Every tensor's data starts on a multiple of 32 bytes.
 *
 * Values are seeded pseudo-random (src/base/rng.h's counter hash, as
 * snug mkmodel draws them): matrices 0.02 x a normal-like value, norms 1 +
 * 0.02 x one; element e of a tensor depends only on the seed, the tensor's
 * name and e. The q/k rows are not in GGUF's interleaved rotary order, which
 * for random values makes no difference. The data are generated and written
 * in chunks (two buffers of 2 MiB), so memory stays small whatever the
 * preset; the file is synced to disk before the program exits.
 *
 * Prints one line saying what it wrote. Exit status 0, 1 on a failure (the
 * message on stderr), 2 on a usage error. Not part of the library.
 */
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/quant.h"
#include "base/rng.h"
#include "convert/mkmodel.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "model/params.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    ALIGNMENT = 32,          /* general.alignment: where each tensor's data starts */
    CHUNK_ELEMS = 1 << 19,   /* elements generated per write; divides 2^32 */
    NAME_BYTES = 64
};

/* One tensor of the file. */
typedef struct gg_tensor {
    char name[NAME_BYTES];
    uint32_t type;           /* SNUG_GGML_BF16 or a block format (matrices), SNUG_GGML_F32 (norms) */
    uint32_t n_dims;         /* 1 or 2 */
    uint64_t ne[2];          /* innermost first: (cols, rows) */
    uint64_t numel, bytes;
    uint64_t offset;         /* in the data section, a multiple of ALIGNMENT */
    uint64_t key;            /* random stream */
    float mean;              /* 1 for norms, 0 for matrices */
    const float *values;     /* NULL, or the values themselves (rope_freqs.weight) */
} gg_tensor;

/* Builds (or, with h->p NULL, measures) the header: magic, version, counts,
 * the keys of the preset's family as llama.cpp writes them
 * (formats/gguf_model.h), the tensor infos, and zeros up to the data
 * section's start. */
static snug_status build_header(snug_gguf_header *h, const snug_model_config *c, const snug_tokenizer *tok,
                                const gg_tensor *t, int32_t n, uint64_t n_kv, snug_error *err)
{
    snug_gguf_put_start(h, (uint64_t)n, n_kv);
    snug_gguf_model_keys(h, c, ALIGNMENT);
    if (tok) {
        snug_status st = snug_tokenizer_put_gguf(tok, h, c->bos_token_id < 0, c->n_eos == 0, err);
        if (st != SNUG_OK) return st;
    }
    for (int32_t i = 0; i < n; i++) snug_gguf_put_tensor(h, t[i].name, t[i].n_dims, t[i].ne, t[i].type, t[i].offset);
    snug_gguf_put_pad(h, ALIGNMENT);
    return SNUG_OK;
}

/* Bytes of n elements of GGML type `type` (F32, BF16 or a block format). */
static uint64_t type_bytes(uint32_t type, uint64_t n)
{
    if (type == SNUG_GGML_F32) return 4 * n;
    if (type == SNUG_GGML_BF16) return 2 * n;
    return snug_qtype_bytes(type, (int64_t)n);
}

/* Appends one tensor to t[*n]: a matrix of rows x cols of `type` or, with
 * rows 0, a norm of cols elements (f32). */
static void add_tensor(gg_tensor *t, int32_t *n, uint64_t seed, const char *name, int64_t rows,
                       int64_t cols, uint32_t type)
{
    gg_tensor *e = &t[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    bool norm = rows == 0;
    e->type = norm ? SNUG_GGML_F32 : type;
    e->n_dims = norm ? 1 : 2;
    e->ne[0] = (uint64_t)cols;
    e->ne[1] = norm ? 1 : (uint64_t)rows;
    e->numel = e->ne[0] * e->ne[1];
    e->bytes = type_bytes(e->type, e->numel);
    e->key = snug_rng_key(seed, name);
    e->mean = norm ? 1.0f : 0.0f;
}

/* The type of matrix `name` (its GGUF name without "blk.L." and
 * ".weight") of cols columns in layer l (-1 outside the layers) of n
 * layers for the file type `ftype` (a GGML type, or 0 for Q4_K_M's mix, as
 * llama.cpp's llama-quantize makes it: Q6_K for output (token_embd where
 * tied, as `tied` says: it is the output then), for attn_v and
 * ffn_down in the first and last eighth of the layers and every third
 * between; Q5_K for a fused attn_qkv; Q4_K otherwise). Rows that are not
 * whole blocks of 256 fall back as llama.cpp's do: Q4_K to Q5_0, Q6_K to
 * Q8_0, Q5_K to Q5_0 (llama.cpp's Q5_1, which snug does not write); rows
 * that are not whole blocks of 32 either stay bf16. */
static uint32_t matrix_type(uint32_t ftype, const char *name, int64_t cols, int32_t l, int32_t n, bool tied)
{
    bool output = strcmp(name, "output") == 0 || (tied && strcmp(name, "token_embd") == 0);
    uint32_t t = ftype;
    bool more_bits = l >= 0 && (l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2);
    if (t == 0)
        t = strcmp(name, "attn_qkv") == 0 ? SNUG_QTYPE_Q5_K
            : output || (more_bits && (strcmp(name, "attn_v") == 0 || strcmp(name, "ffn_down") == 0))
                ? SNUG_QTYPE_Q6_K
                : SNUG_QTYPE_Q4_K;
    if (t != SNUG_GGML_BF16 && cols % 32 != 0) return SNUG_GGML_BF16;
    if (cols % 256 != 0 && (t == SNUG_QTYPE_Q4_K || t == SNUG_QTYPE_Q5_K)) return SNUG_QTYPE_Q5_0;
    if (cols % 256 != 0 && t == SNUG_QTYPE_Q6_K) return SNUG_QTYPE_Q8_0;
    return t;
}

/* Lists the tensors of cfg (the checkpoint tensors of its family, under
 * llama.cpp's names) in file order with their data offsets into t (room
 * for their count + 1), the matrices of type ftype (matrix_type), the 1-D
 * ones (norms, biases) f32, then rope_freqs.weight when rope_freqs is
 * given; returns their number, or -1 with err set. *data_bytes gets the
 * size of the data section. */
static int32_t list_tensors(const snug_model_config *c, uint64_t seed, uint32_t ftype, const float *rope_freqs,
                            gg_tensor *t, int32_t cap, uint64_t *data_bytes, snug_error *err)
{
    snug_tensor_spec *specs = NULL;
    int32_t n_specs = 0, n = 0;
    if (snug_params_checkpoint_tensors(c, &specs, &n_specs, err) != SNUG_OK) return -1;
    if (n_specs > cap - 1) { /* (room for rope_freqs after them) */
        snug_errorf(err, SNUG_INTERNAL, "%d tensors for a list of %d", n_specs, cap - 1);
        snug_mem_free(specs);
        return -1;
    }
    for (int32_t i = 0; i < n_specs; i++) {
        char name[NAME_BYTES], base[NAME_BYTES] = "";
        int layer = -1, used = 0;
        if (!snug_gguf_tensor_name(c->arch, specs[i].name, name, sizeof name)) {
            snug_errorf(err, SNUG_INTERNAL, "tensor %s has no GGUF name", specs[i].name);
            snug_mem_free(specs);
            return -1;
        }
        if (sscanf(name, "blk.%d.%n", &layer, &used) != 1) layer = -1, used = 0;
        snprintf(base, sizeof base, "%s", name + used);
        char *dot = strrchr(base, '.');
        if (dot) *dot = '\0';
        bool vec = specs[i].n_dims == 1;
        add_tensor(t, &n, seed, name, vec ? 0 : specs[i].rows, vec ? specs[i].rows : specs[i].cols,
                   matrix_type(ftype, base, vec ? 0 : specs[i].cols, layer, c->n_layers, c->tie_word_embeddings));
        if (strstr(name, ".bias")) t[n - 1].mean = 0.0f;
    }
    snug_mem_free(specs);
    if (rope_freqs) {
        add_tensor(t, &n, seed, "rope_freqs.weight", 0, c->head_dim / 2, SNUG_GGML_F32);
        t[n - 1].values = rope_freqs;
    }
    uint64_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        t[i].offset = off;
        off += snug_round_up(t[i].bytes, ALIGNMENT);
    }
    *data_bytes = off;
    return n;
}

/* Fills out with elements e0 .. e0 + count of tensor t in its type; tmp
 * holds count floats. The chunk must not cross a multiple of 2^32 elements
 * (the high half of e is folded into the key once); for a block format it
 * is whole blocks. */
static void generate(const gg_tensor *t, uint64_t e0, size_t count, float *tmp, void *out)
{
    uint32_t key = (uint32_t)snug_mix64(t->key ^ (e0 >> 32));
    uint32_t base = (uint32_t)e0;
    float mean = t->mean;
    float *f = t->type == SNUG_GGML_F32 ? out : tmp;
    if (t->values) {
        memcpy(out, t->values + e0, count * sizeof(float));
        return;
    }
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        uint32_t x = snug_hash32((base + (uint32_t)i) * 0x9E3779B9u ^ key);
        f[i] = mean + 0.02f * snug_rng_normalish(x);
    }
    if (t->type == SNUG_GGML_BF16) snug_convert(out, SNUG_DTYPE_BF16, tmp, SNUG_DTYPE_F32, count);
    else if (t->type != SNUG_GGML_F32) snug_quant_quantize((snug_qtype)t->type, tmp, out, (int64_t)count);
}

static int usage(const char *msg)
{
    fprintf(stderr, "mkgguf: %s\nusage: build/bench/mkgguf OUT.gguf [--preset NAME] [--seed N] "
            "[--type bf16|q8_0|q4_0|q6_k|q4_k_m] [--llama3-rope FACTOR,LOW,HIGH,ORIGINAL] [--vocab PATH]\n", msg);
    return 2;
}

/* The program: see the top of this file. */
int main(int argc, char **argv)
{
    const char *path = NULL, *preset = "llama-3.2-1b", *vocab = NULL;
    uint64_t seed = 5;
    uint32_t ftype = SNUG_GGML_BF16;
    double llama3[4] = {0};
    bool rope = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--llama3-rope") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%lf,%lf,%lf,%lf", &llama3[0], &llama3[1], &llama3[2], &llama3[3]) != 4 ||
                !(llama3[0] >= 1 && llama3[1] > 0 && llama3[2] > llama3[1] && llama3[3] > 0))
                return usage("--llama3-rope expects FACTOR,LOW,HIGH,ORIGINAL (FACTOR >= 1, 0 < LOW < HIGH)");
            rope = true;
        } else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            static const struct { const char *name; uint32_t type; } types[] = {
                {"bf16", SNUG_GGML_BF16}, {"q8_0", SNUG_QTYPE_Q8_0}, {"q4_0", SNUG_QTYPE_Q4_0},
                {"q6_k", SNUG_QTYPE_Q6_K}, {"q4_k_m", 0}};
            size_t k = 0;
            while (k < SNUG_ARRAY_LEN(types) && strcmp(types[k].name, v) != 0) k++;
            if (k == SNUG_ARRAY_LEN(types)) return usage("--type expects bf16, q8_0, q4_0, q6_k or q4_k_m");
            ftype = types[k].type;
        } else if (strcmp(argv[i], "--vocab") == 0 && i + 1 < argc) {
            vocab = argv[++i];
        } else if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc) {
            preset = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            char *end;
            seed = strtoull(argv[++i], &end, 10);
            if (*end || !*argv[i]) return usage("--seed expects an unsigned integer");
        } else if (argv[i][0] == '-' || path) {
            return usage("unknown or repeated argument");
        } else {
            path = argv[i];
        }
    }
    if (!path) return usage("no output file given");

    snug_error err = {0};
    snug_status st;
    snug_model_config cfg;
    gg_tensor *t = NULL;
    snug_gguf_header h = {0};
    snug_tokenizer *tok = NULL;
    float *tmp = NULL;          /* (CHUNK_ELEMS) f32 values before conversion */
    unsigned char *buf = NULL;  /* (CHUNK_ELEMS) elements as written, f32 or bf16 */
    int fd = -1;
    st = snug_preset_config(preset, &cfg, &err);
    if (st != SNUG_OK) goto fail;
    int32_t cap = 5 + 16 * cfg.n_layers; /* every family's tensors (13 a layer at most), and rope_freqs */
    t = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)cap * sizeof *t, &err);
    tmp = snug_mem_alloc(SNUG_MEM_STAGING, CHUNK_ELEMS * sizeof *tmp, &err);
    buf = snug_mem_alloc(SNUG_MEM_STAGING, CHUNK_ELEMS * sizeof(float), &err);
    if (!t || !tmp || !buf) {
        st = SNUG_NOMEM;
        goto fail;
    }
    if (rope && cfg.head_dim / 2 > SNUG_MAX_ROPE_FACTORS) {
        st = snug_errorf(&err, SNUG_UNSUPPORTED, "--llama3-rope: head size %d has more than %d frequencies",
                         cfg.head_dim, SNUG_MAX_ROPE_FACTORS);
        goto fail;
    }
    float factors[SNUG_MAX_ROPE_FACTORS];
    if (rope) { /* the factors of this scaling, as llama.cpp's converter writes them */
        snug_model_config scaled = cfg;
        scaled.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LLAMA3, .factor = llama3[0],
                                                  .low_freq_factor = llama3[1], .high_freq_factor = llama3[2],
                                                  .original_max_position_embeddings = (int64_t)llama3[3]};
        snug_gguf_llama3_factors(&scaled, factors);
    }
    uint64_t data_bytes;
    int32_t n = list_tensors(&cfg, seed, ftype, rope ? factors : NULL, t, cap, &data_bytes, &err);
    if (n < 0) {
        st = SNUG_INTERNAL;
        goto fail;
    }
    if (vocab) {
        st = snug_tokenizer_load(vocab, &tok, &err);
        if (st == SNUG_OK && snug_tokenizer_n_vocab(tok) != cfg.vocab_size)
            st = snug_errorf(&err, SNUG_INVALID, "--vocab %s: %d tokens; preset %s has %lld", vocab,
                             snug_tokenizer_n_vocab(tok), preset, (long long)cfg.vocab_size);
        if (st != SNUG_OK) goto fail;
    }
    st = build_header(&h, &cfg, tok, t, n, 0, &err); /* measure (counting the keys), then build */
    if (st != SNUG_OK) goto fail;
    uint64_t n_kv = h.n_kv;
    h = (snug_gguf_header){.cap = h.len};
    h.p = snug_mem_alloc(SNUG_MEM_OTHER, h.cap, &err);
    if (!h.p) {
        st = SNUG_NOMEM;
        goto fail;
    }
    st = build_header(&h, &cfg, tok, t, n, n_kv, &err);
    if (st != SNUG_OK) goto fail;

    st = snug_file_create(path, &fd, &err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, h.p, h.len, 0, path, &err);
    if (st != SNUG_OK) goto fail;
    uint64_t matrix_bytes = 0, norm_bytes = 0;
    int32_t n_norms = 0;
    for (int32_t i = 0; i < n && st == SNUG_OK; i++) {
        for (uint64_t e0 = 0; e0 < t[i].numel && st == SNUG_OK; e0 += CHUNK_ELEMS) {
            size_t count = (size_t)SNUG_MIN((uint64_t)CHUNK_ELEMS, t[i].numel - e0);
            generate(&t[i], e0, count, tmp, buf);
            st = snug_pwrite_full(fd, buf, type_bytes(t[i].type, count),
                                  h.len + t[i].offset + type_bytes(t[i].type, e0), path, &err);
        }
        if (t[i].type == SNUG_GGML_F32) n_norms++, norm_bytes += t[i].bytes;
        else matrix_bytes += t[i].bytes;
    }
    /* the padding after the last tensor, so that the file ends on the alignment */
    static const unsigned char zeros[ALIGNMENT];
    const gg_tensor *last = &t[n - 1];
    uint64_t end = last->offset + last->bytes;
    if (st == SNUG_OK && end < data_bytes)
        st = snug_pwrite_full(fd, zeros, (size_t)(data_bytes - end), h.len + end, path, &err);
    if (st != SNUG_OK) goto fail;
    st = snug_file_close(fd, path, &err);
    fd = -1;
    if (st != SNUG_OK) goto fail;
    printf("mkgguf: wrote %s: preset %s, seed %llu, GGUF v3, %llu keys%s, %d tensors: %d %s "
           "matrices (%llu bytes), %d f32 norms (%llu bytes); %llu bytes in all\n",
           path, preset, (unsigned long long)seed, (unsigned long long)n_kv, tok ? " (a vocabulary among them)" : "", n,
           n - n_norms,
           ftype == SNUG_GGML_BF16 ? "bf16" : ftype == 0 ? "Q4_K_M" : snug_qtype_name(ftype),
           (unsigned long long)matrix_bytes, n_norms, (unsigned long long)norm_bytes,
           (unsigned long long)(h.len + data_bytes));
    snug_tokenizer_free(tok);
    snug_mem_free(h.p);
    snug_mem_free(buf);
    snug_mem_free(tmp);
    snug_mem_free(t);
    return 0;
fail:
    if (fd >= 0) close(fd);
    fprintf(stderr, "mkgguf: %s\n", err.msg[0] ? err.msg : snug_status_str(st));
    snug_tokenizer_free(tok);
    snug_mem_free(h.p);
    snug_mem_free(buf);
    snug_mem_free(tmp);
    snug_mem_free(t);
    return 1;
}
