/*
 * api_request.h: the JSON body of an OpenAI `POST /v1/completions` or
 * `POST /v1/chat/completions` request, parsed into a checked C struct.
 *
 * Every rule a field breaks is answered in OpenAI's error shape: HTTP 400,
 * type "invalid_request_error", `param` naming the field ("temperature",
 * "messages[2].role", "prompt[1][3]") and a message that names the field,
 * what was expected and what was found. No field is ignored: one the
 * server does not do as asked (best_of above n, a suffix, stored
 * completions, the deprecated functions...) and any unknown field is a 400
 * naming it. Structured output (response_format, grammar) and tools are
 * compiled here into the request's grammar (api_structured.c,
 * api_tools.c). JSON null for an optional field means it was omitted.
 *
 * Before jansson sees the body it is checked for size (413 past
 * max_body_bytes), UTF-8 and nesting depth (a scan of the bytes, so that
 * 10,000 nested brackets are a 400, not a deep recursion); the parse is
 * then admitted against the allocator's capacity (snug_json_parse). Memory
 * that does not fit is SNUG_NOMEM with status 503, code "overloaded": the
 * server is out of room for the request, not the request at fault.
 * All memory is the accounting allocator's (category other).
 */
#ifndef SNUG_API_REQUEST_H
#define SNUG_API_REQUEST_H

#include "base/common.h"
#include "engine/sampler.h"
#include "engine/stop.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"

#include <jansson.h>

enum {
    SNUG_API_LOGPROBS_MAX = 20,     /* logprobs (completions), top_logprobs (chat) */
    SNUG_API_STOP_STRINGS_MAX = 4,  /* OpenAI's limit on `stop` */
    SNUG_API_LOGIT_BIAS_MAX = 300,  /* OpenAI's limit on `logit_bias` entries */
    SNUG_API_MAX_TOKENS_MAX = 1 << 24,
    /* stop_token_ids share snug_stop_params' EOS slots with the model's own
     * EOS ids, which the engine adds to each sequence's */
    SNUG_API_STOP_TOKEN_IDS_MAX = SNUG_STOP_EOS_MAX - SNUG_STOP_MODEL_EOS_MAX
};

/* What a body is parsed as: OpenAI's completions or chat completions, or
 * Anthropic's Messages (its request or count_tokens') or OpenAI's
 * Responses, which are checked in their own terms and read as the chat
 * they mean (the request's kind is then SNUG_API_CHAT, its dialect
 * SNUG_API_ANTHROPIC or SNUG_API_RESPONSES). */
typedef enum snug_api_kind {
    SNUG_API_COMPLETIONS = 0,
    SNUG_API_CHAT = 1,
    SNUG_API_MESSAGES = 2,
    SNUG_API_MESSAGES_COUNT = 3,
    SNUG_API_RESPONSES_CREATE = 4,
    SNUG_API_EMBEDDINGS = 5,        /* /v1/embeddings: input as completions' prompts */
    SNUG_API_RERANK = 6             /* /v1/rerank: a query, documents as prompts (texts) */
} snug_api_kind;

/* Whose API a request came in, and so the shape of its answer and errors. */
typedef enum snug_api_dialect {
    SNUG_API_OPENAI = 0,     /* completions and chat completions */
    SNUG_API_ANTHROPIC = 1,  /* Messages */
    SNUG_API_RESPONSES = 2   /* OpenAI's Responses (errors in OpenAI's shape) */
} snug_api_dialect;

typedef struct snug_api_limits {
    size_t max_body_bytes;  /* a longer body is 413; default 1 MiB */
    int max_depth;          /* most nested arrays and objects; default 64 */
    int32_t n_vocab;        /* token ids (prompt, logit_bias, stop_token_ids) must be below;
                             * default INT32_MAX (set it to the model's) */
    int max_n;              /* most choices per request; default 16 */
    int max_prompts;        /* most prompts in a completions list; default 16 */
    int max_inputs;         /* most inputs of one embeddings request; default 256 */
    int64_t max_model_len;  /* the model's context; max_tokens above it is a 400. 0 (the
                             * default) = unknown. Prompt lengths are checked by the caller
                             * after tokenizing */
    const snug_tool_format *tool_format; /* how the model writes tool calls: the format its
                             * chat template shows (snug_api_limits_set_template);
                             * default json */
    size_t parse_bytes_max; /* the most a parse may ever take (the server's memory for
                             * requests): a body whose parse needs more
                             * (snug_json_parse_bound) is 413 before it is parsed; 0 (the
                             * default): no such limit */
    bool think_budget;      /* the model has a think block whose tokens a request may budget:
                             * Anthropic's thinking.budget_tokens becomes one; default false */
} snug_api_limits;

typedef enum snug_api_tool_choice {
    SNUG_TOOL_CHOICE_NONE = 0,  /* no calls: the reply is content (tools still reach the template) */
    SNUG_TOOL_CHOICE_AUTO,      /* the model decides; its calls are recognised in its format */
    SNUG_TOOL_CHOICE_REQUIRED,  /* calls only, of any of the tools (constrained) */
    SNUG_TOOL_CHOICE_FUNCTION   /* one call of the named function (constrained) */
} snug_api_tool_choice;

/* One completions prompt: text or token ids, never both. */
typedef struct snug_api_prompt {
    const char *text;       /* a string prompt (points into the request's root), or NULL */
    size_t text_len;        /* bytes, >= 1 */
    int32_t *ids;           /* a token-id prompt (owned by the request), or NULL */
    int64_t n_ids;          /* >= 1 when ids is set */
} snug_api_prompt;

typedef struct snug_api_request {
    snug_api_kind kind;             /* COMPLETIONS or CHAT (Anthropic's as CHAT) */
    snug_api_dialect dialect;
    bool count_only;                /* Anthropic's count_tokens: the prompt, nothing generated */
    bool base64;                    /* embeddings: encoding_format "base64" (little-endian
                                     * float32s), else "float" */
    int32_t dimensions;             /* embeddings: the dimensions asked for; 0 when omitted
                                     * (the caller checks them against the model's) */
    const char *query;              /* rerank: the query (into root), query_len bytes; the
                                     * documents are prompts[] (texts) */
    size_t query_len;
    const char *instruction;        /* rerank: what relevance means to the reranker, or NULL */
    int top_n;                      /* rerank: the results answered, most relevant first;
                                     * n_prompts when omitted */
    bool return_documents;          /* rerank: each result with its document's text (default
                                     * true) */
    json_t *source;                 /* Anthropic's or Responses' body as the client sent it (owned),
                                     * for answers that repeat its fields; else NULL */
    json_t *root;                   /* the parsed body (owned; strings point into it) */
    const char *model;              /* NULL when omitted */
    snug_api_prompt *prompts;       /* completions: n_prompts >= 1 (owned); chat: NULL */
    int n_prompts;
    const json_t *messages;         /* chat: the checked messages (borrowed from root), every
                                     * content a string (arrays of text parts joined with
                                     * "\n"; an assistant's null or absent content ""),
                                     * name and tool_call_id strings when present, each of
                                     * tool_calls with a string function.name and
                                     * .arguments (the object it holds when it holds one,
                                     * as templates take it); null members removed (from
                                     * each message, its tool calls and their functions) */
    snug_sampling_params sampling;  /* checked with snug_sampling_params_validate */
    snug_logit_bias *logit_bias;    /* owned storage sampling.logit_bias points to, or NULL */
    snug_stop_params stop;          /* stop strings, stop_token_ids as EOS ids (the caller adds
                                     * the model's), ignore_eos, max_tokens */
    int32_t max_tokens;             /* 0 when omitted (the caller picks the default) */
    int n;                          /* choices, >= 1; default 1 */
    bool stream;
    bool include_usage;             /* stream_options.include_usage when streaming (without
                                     * stream, stream_options is checked, then ignored) */
    int logprobs;                   /* completions: logprobs 0..20; chat: top_logprobs 0..20
                                     * when logprobs is true; -1 when not asked for */
    bool echo;                      /* completions only */
    bool add_generation_prompt;     /* chat (vLLM's extension): default true */
    bool continue_final_message;    /* chat (vLLM's extension; Anthropic's prefill): the last
                                     * message, an assistant's, continued (no generation prompt) */
    bool tokens_as_ids;             /* return_tokens_as_token_ids (vLLM's extension): tokens
                                     * in log-probabilities as "token_id:N" */
    bool no_speculation;            /* speculative: false (snug's), or llama.cpp's
                                     * speculative.n_max 0: decoded without drafts */
    int32_t spec_max;               /* speculative.n_max (llama.cpp's): drafts a step at most,
                                     * capped by the server's; 0: the server's */
    const char *cache_salt;         /* vLLM's cache_salt: a non-empty string, or NULL */
    size_t cache_salt_len;
    snug_grammar *grammar;          /* what the output keeps to, compiled (owned), or NULL:
                                     * `grammar` (GBNF, llama.cpp's field), response_format
                                     * json_object (a JSON object) or json_schema (JSON that
                                     * validates against its schema) */
    const char *grammar_param;      /* the field it came from ("grammar", "response_format",
                                     * "tool_choice") */
    const json_t *tools;            /* chat: the checked tools (borrowed from root), NULL when
                                     * none; they reach the template whatever tool_choice */
    snug_api_tool_choice tool_choice; /* default AUTO with tools, NONE without */
    bool parallel_tool_calls;       /* default true: "required" may give several calls */
    const json_t *chat_template_kwargs; /* chat: extra variables for the template (borrowed
                                     * from root; vLLM's and llama-server's field: an object,
                                     * none of messages, tools, add_generation_prompt), or NULL */
    int32_t thinking_token_budget;  /* chat (vLLM's field): the most tokens the reply's think
                                     * block may take before the engine closes it; -1 when
                                     * omitted (no budget) */
    const snug_tool_format *tool_format; /* lim's */
} snug_api_request;

/* What a client is told when the server's memory for requests is in use
 * (503 overloaded): in its words, the allocator's account kept for the log. */
#define SNUG_API_BUSY_MESSAGE                                                                      \
    "the server is busy: its memory for requests is in use by others; try again in a moment"

typedef struct snug_api_error {
    int status;         /* HTTP status: 400, 413, 503 */
    const char *type;   /* "invalid_request_error" or "server_error" (a constant) */
    char param[64];     /* the field ("temperature", "messages[2].role"); "" when none */
    const char *code;   /* a constant ("body_too_large", "overloaded") or NULL */
    char message[512];  /* for the client: what went wrong in its words */
    char detail[256];   /* for the server's log, with a 503: the allocator's own account
                         * (which figure would pass which); "" otherwise */
} snug_api_error;

/* Fills l with the defaults above. */
void snug_api_limits_default(snug_api_limits *l);

/* Sets l->tool_format to the tool-call format that template_text (the
 * chat template the server renders prompts with; NULL: none) shows, by
 * snug_tool_format_of: Hermes <tool_call>, Mistral [TOOL_CALLS], Llama 3
 * JSON, else plain JSON. Requests parsed under l then read their replies'
 * calls, hold streamed text back, and constrain required and named calls in
 * that format. The format is a constant; template_text is not kept. */
void snug_api_limits_set_template(snug_api_limits *l, const char *template_text);

/* Parses the len bytes at body (not NUL-terminated) as a request of kind
 * `kind` under the limits lim (NULL = the defaults). On success *out owns
 * what it points to (snug_api_request_free releases it) and every field is
 * in range. On failure *out is zeroed (freeing it is harmless) and *err
 * (which may be NULL) says why:
 *   SNUG_INVALID, status 400 (a bad field, body or JSON) or 413 (the body
 *     is longer than lim->max_body_bytes, code "body_too_large");
 *   SNUG_NOMEM, status 503, type "server_error", code "overloaded": the
 *     parse or an allocation did not fit; nothing is held. */
snug_status snug_api_parse(snug_api_kind kind, const char *body, size_t len,
                           const snug_api_limits *lim, snug_api_request *out,
                           snug_api_error *err);

/* Frees everything r owns and zeroes it; r->messages and every prompt's
 * text become invalid. A zeroed request is ignored. */
void snug_api_request_free(snug_api_request *r);

#endif /* SNUG_API_REQUEST_H */
