/*
 * tok_spm.c: SentencePiece tokenizer.model files: a protobuf ModelProto
 * read by a small bounded protobuf reader (varints of at most 10 bytes,
 * every length checked against the bytes that remain, unknown fields
 * skipped by wire type).
 *
 * ModelProto { repeated SentencePiece pieces = 1; TrainerSpec trainer_spec = 2;
 *              NormalizerSpec normalizer_spec = 3; ... }
 * SentencePiece { string piece = 1; float score = 2; Type type = 3 (NORMAL 1,
 *              UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6) }
 * TrainerSpec { model_type = 3 (UNIGRAM 1, BPE 2, WORD 3, CHAR 4);
 *              treat_whitespace_as_suffix = 24; byte_fallback = 35;
 *              unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43 }
 * NormalizerSpec { name = 1; precompiled_charsmap = 2; add_dummy_prefix = 3;
 *              remove_extra_whitespaces = 4; escape_whitespaces = 5 }
 *
 * Only BPE models are read; pieces merge by score. Normalization rules (a
 * precompiled character map), remove_extra_whitespaces and whitespace as a
 * suffix are refused, naming the setting.
 */
#include "tok_internal.h"

#include "base/mem.h"

#include <math.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* A protobuf message being read: [p, end) of the file's bytes. */
typedef struct pb {
    const uint8_t *base, *p, *end;
} pb;

static bool pb_varint(pb *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return false;
        uint8_t c = *r->p++;
        if (shift == 63 && c > 1) return false; /* more than 64 bits */
        x |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Reads a field's key; false when truncated or the field number is 0. */
static bool pb_key(pb *r, uint32_t *field, int *wire)
{
    uint64_t k;
    if (!pb_varint(r, &k) || (k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) return false;
    *field = (uint32_t)(k >> 3);
    *wire = (int)(k & 7);
    return true;
}

/* Reads a length-delimited value as a sub-message. */
static bool pb_len(pb *r, pb *sub)
{
    uint64_t n;
    if (!pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return false;
    *sub = (pb){r->base, r->p, r->p + n};
    r->p += n;
    return true;
}

static bool pb_fixed32(pb *r, uint32_t *v)
{
    if (r->end - r->p < 4) return false;
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return true;
}

/* Skips a value of wire type wire; false when truncated or the type is
 * not one proto3/proto2 files use (groups). */
static bool pb_skip(pb *r, int wire)
{
    uint64_t v;
    pb sub;
    switch (wire) {
    case WIRE_VARINT: return pb_varint(r, &v);
    case WIRE_I64:
        if (r->end - r->p < 8) return false;
        r->p += 8;
        return true;
    case WIRE_LEN: return pb_len(r, &sub);
    case WIRE_I32:
        if (r->end - r->p < 4) return false;
        r->p += 4;
        return true;
    default: return false;
    }
}

static size_t pb_at(const pb *r) { return (size_t)(r->p - r->base); }

/* What the trainer and normalizer specs say. */
typedef struct spm_spec {
    uint64_t model_type;
    bool byte_fallback, whitespace_suffix;
    int64_t unk_id, bos_id, eos_id;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    const uint8_t *norm_name;
    size_t norm_name_len, charsmap_len;
} spm_spec;

static snug_status truncated(const char *name, const pb *r, const char *where, snug_error *err)
{
    return tok_bad(err, name, "%s: truncated or malformed protobuf at byte %zu", where, pb_at(r));
}

/* An int32 field (negative values come as 10-byte varints). */
static bool int32_of(uint64_t v, int64_t *out)
{
    int64_t x = (int64_t)v;
    if (x < INT32_MIN || x > INT32_MAX) return false;
    *out = x;
    return true;
}

static snug_status read_trainer(const char *name, pb *r, spm_spec *s, snug_error *err)
{
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        uint64_t v = 0;
        if (!pb_key(r, &field, &wire)) return truncated(name, r, "trainer_spec", err);
        bool wanted = field == 3 || field == 24 || field == 35 || (field >= 40 && field <= 42);
        if (!wanted) {
            if (!pb_skip(r, wire)) return truncated(name, r, "trainer_spec", err);
            continue;
        }
        if (wire != WIRE_VARINT || !pb_varint(r, &v))
            return tok_bad(err, name, "trainer_spec field %u is not a varint (at byte %zu)", field, pb_at(r));
        int64_t *id = field == 40 ? &s->unk_id : field == 41 ? &s->bos_id : field == 42 ? &s->eos_id : NULL;
        if (id && !int32_of(v, id))
            return tok_bad(err, name, "trainer_spec field %u: %llu is not an int32", field,
                           (unsigned long long)v);
        if (field == 3) s->model_type = v;
        if (field == 24) s->whitespace_suffix = v != 0;
        if (field == 35) s->byte_fallback = v != 0;
    }
    return SNUG_OK;
}

static snug_status read_normalizer(const char *name, pb *r, spm_spec *s, snug_error *err)
{
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        uint64_t v = 0;
        pb sub = {0};
        if (!pb_key(r, &field, &wire)) return truncated(name, r, "normalizer_spec", err);
        if (field == 1 || field == 2) {
            if (wire != WIRE_LEN || !pb_len(r, &sub)) return truncated(name, r, "normalizer_spec", err);
            if (field == 1) {
                s->norm_name = sub.p;
                s->norm_name_len = (size_t)(sub.end - sub.p);
            } else {
                s->charsmap_len = (size_t)(sub.end - sub.p);
            }
        } else if (field >= 3 && field <= 5) {
            if (wire != WIRE_VARINT || !pb_varint(r, &v))
                return tok_bad(err, name, "normalizer_spec field %u is not a varint (at byte %zu)",
                               field, pb_at(r));
            bool *b = field == 3 ? &s->add_dummy_prefix : field == 4 ? &s->remove_extra_whitespaces
                                                                     : &s->escape_whitespaces;
            *b = v != 0;
        } else if (!pb_skip(r, wire)) {
            return truncated(name, r, "normalizer_spec", err);
        }
    }
    return SNUG_OK;
}

/* First pass: counts the pieces and reads the specs. */
static snug_status read_specs(const char *name, const uint8_t *data, size_t len, int32_t *n_pieces,
                              spm_spec *s, snug_error *err)
{
    pb r = {data, data, data + len};
    int64_t n = 0;
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        pb sub = {0};
        if (!pb_key(&r, &field, &wire)) return truncated(name, &r, "ModelProto", err);
        if (field >= 1 && field <= 3) {
            if (wire != WIRE_LEN || !pb_len(&r, &sub)) return truncated(name, &r, "ModelProto", err);
            snug_status st = SNUG_OK;
            if (field == 1) n++;
            if (field == 2) st = read_trainer(name, &sub, s, err);
            if (field == 3) st = read_normalizer(name, &sub, s, err);
            if (st != SNUG_OK) return st;
        } else if (!pb_skip(&r, wire)) {
            return truncated(name, &r, "ModelProto", err);
        }
    }
    if (n == 0) return tok_bad(err, name, "no pieces (is this a SentencePiece model?)");
    if (n > (1 << 24)) return tok_bad(err, name, "%lld pieces; at most %d", (long long)n, 1 << 24);
    *n_pieces = (int32_t)n;
    return SNUG_OK;
}

/* Refuses what snug does not implement, naming it. */
static snug_status check_specs(const char *name, const spm_spec *s, snug_error *err)
{
    static const char *const types[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
    char shown[48];
    if (s->model_type != 2)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: SentencePiece model type %s is not "
                           "supported (BPE is)", name, s->model_type < 5 ? types[s->model_type] : "unknown");
    if (s->charsmap_len > 0)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: normalizer '%s' has normalization rules "
                           "(a precompiled character map), which snug does not implement", name,
                           snug_bytes_shown(s->norm_name ? (const char *)s->norm_name : "",
                                            s->norm_name ? s->norm_name_len : 0, shown, sizeof shown));
    if (s->remove_extra_whitespaces)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: normalizer_spec remove_extra_whitespaces is "
                           "set; snug does not implement it", name);
    if (s->whitespace_suffix)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: trainer_spec treat_whitespace_as_suffix is "
                           "set; snug does not implement it", name);
    if (s->add_dummy_prefix && !s->escape_whitespaces)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: add_dummy_prefix without escape_whitespaces "
                           "is not supported", name);
    return SNUG_OK;
}

/* Reads piece number id (its message in r) into t. */
static snug_status read_piece(snug_tokenizer *t, const char *name, pb *r, int32_t id,
                              uint8_t *types, snug_error *err)
{
    const uint8_t *text = NULL;
    size_t len = 0;
    uint32_t bits = 0;
    uint64_t type = TOK_PIECE_NORMAL;
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        pb sub = {0};
        bool ok;
        if (!pb_key(r, &field, &wire)) return tok_bad(err, name, "piece %d: malformed protobuf", id);
        if (field == 1) {
            ok = wire == WIRE_LEN && pb_len(r, &sub);
            if (ok) {
                text = sub.p;
                len = (size_t)(sub.end - sub.p);
            }
        } else if (field == 2) {
            ok = wire == WIRE_I32 && pb_fixed32(r, &bits);
        } else if (field == 3) {
            ok = wire == WIRE_VARINT && pb_varint(r, &type);
        } else {
            ok = pb_skip(r, wire);
        }
        if (!ok) return tok_bad(err, name, "piece %d: field %u is truncated or of the wrong type", id, field);
    }
    float score;
    char shown[48];
    memcpy(&score, &bits, sizeof score);
    if (!text || len == 0) return tok_bad(err, name, "piece %d has no text", id);
    if (type < 1 || type > 6)
        return tok_bad(err, name, "piece %d '%s' has type %llu; expected 1 (NORMAL) to 6 (BYTE)", id,
                       snug_bytes_shown(text, len, shown, sizeof shown), (unsigned long long)type);
    if (!isfinite(score))
        return tok_bad(err, name, "piece %d '%s' has a score that is not finite", id,
                       snug_bytes_shown(text, len, shown, sizeof shown));
    if (len > 65536) return tok_bad(err, name, "piece %d is longer than 64 KiB", id);
    types[id] = (uint8_t)type;
    if (type == TOK_PIECE_UNKNOWN && t->unk >= 0)
        return tok_bad(err, name, "pieces %d and %d are both of type UNKNOWN", t->unk, id);
    if (type == TOK_PIECE_UNKNOWN) t->unk = id;
    snug_status st = tok_set(t, id, (const char *)text, len, score, tok_piece_attr((int)type), err);
    if (st != SNUG_OK) return snug_error_context(err, st, name, "piece %d: ", id);
    return SNUG_OK;
}

/* Builds the tokenizer (not finished). */
static snug_status build(const char *name, const uint8_t *data, size_t len, snug_tokenizer **out,
                         snug_error *err)
{
    spm_spec s = {.unk_id = 0, .bos_id = 1, .eos_id = 2, .add_dummy_prefix = true,
                  .remove_extra_whitespaces = true, .escape_whitespaces = true, .model_type = 1};
    int32_t n = 0;
    snug_tokenizer *t = NULL;
    uint8_t *types = NULL;
    snug_status st = read_specs(name, data, len, &n, &s, err);
    if (st == SNUG_OK) st = check_specs(name, &s, err);
    if (st == SNUG_OK) st = tok_create(name, TOK_SENTENCEPIECE, n, &t, err);
    if (st != SNUG_OK) goto done;
    types = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n, err);
    if (!types) {
        st = SNUG_NOMEM;
        goto done;
    }
    pb r = {data, data, data + len};
    for (int32_t id = 0; r.p < r.end && st == SNUG_OK;) { /* read_specs checked the layout */
        uint32_t field = 0;
        int wire = 0;
        pb sub = {0};
        if (!pb_key(&r, &field, &wire) || (field == 1 ? !pb_len(&r, &sub) : !pb_skip(&r, wire)))
            st = truncated(name, &r, "ModelProto", err);
        else if (field == 1)
            st = read_piece(t, name, &sub, id++, types, err);
    }
    if (st != SNUG_OK) goto done;
    const struct {
        const char *what;
        int64_t id;
    } ids[] = {{"unk_id", s.unk_id}, {"bos_id", s.bos_id}, {"eos_id", s.eos_id}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(ids); i++)
        if (ids[i].id < -1 || ids[i].id >= n) {
            st = tok_bad(err, name, "trainer_spec %s %lld is not -1 or a piece (0 to %d)", ids[i].what,
                         (long long)ids[i].id, n - 1);
            goto done;
        }
    if (s.unk_id >= 0 && types[s.unk_id] != TOK_PIECE_UNKNOWN) {
        size_t k;
        const char *text = tok_text(t, (int32_t)s.unk_id, &k);
        char shown[48];
        st = tok_bad(err, name, "trainer_spec unk_id %lld is piece '%s', not the UNKNOWN piece",
                     (long long)s.unk_id, snug_bytes_shown(text, k, shown, sizeof shown));
        goto done;
    }
    t->merge_mode = TOK_MERGE_SCORES;
    t->spm_escape_spaces = s.escape_whitespaces;
    t->spm_prepend = s.add_dummy_prefix ? TOK_PREPEND_EVERY : TOK_PREPEND_NEVER;
    t->strip_leading_space = s.add_dummy_prefix;
    t->bos = (int32_t)s.bos_id;
    t->eos = (int32_t)s.eos_id;
    t->add_bos = t->bos >= 0;
    st = tok_index(t, err);
    if (st == SNUG_OK && !s.byte_fallback) /* byte pieces without byte_fallback: never produced */
        for (int b = 0; b < 256; b++) t->byte_ids[b] = -1;
    if (st == SNUG_OK) st = tok_add_piece_tokens(t, types, err);
done:
    snug_mem_free(types);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SNUG_OK;
}

snug_status tok_parse_spm(const char *name, const uint8_t *data, size_t len, snug_tokenizer **out,
                          snug_error *err)
{
    return tok_native_parse(build, name, data, len, out, err);
}

snug_status tok_read_spm(const char *path, snug_tokenizer **out, snug_error *err)
{
    return tok_native_read(build, path, out, err);
}
