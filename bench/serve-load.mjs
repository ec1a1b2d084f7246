// bench/serve-load.mjs: a load generator for snug serve (or any OpenAI-compatible server).
// Node 20, no dependencies: the built-in fetch and its body stream.
//
//   node bench/serve-load.mjs --url http://127.0.0.1:PORT --clients N
//        [--duration S] [--requests K] [--max-tokens M] [--prompt TEXT] [--temperature T]
//        [--seed S] [--model NAME] [--timeout S] [--response-format JSON] [--schema-per-request]
//
// N clients run at once, each in a loop: a streaming POST /v1/completions (the prompt, default
// ~32 tokens of story text; max_tokens M, default 64; temperature 0.8; ignore_eos; a seed of
// its own per request; stream_options.include_usage), read to its end, then the next. A client
// starts no request after S seconds (default 20) or after K requests (no limit by default),
// whichever comes first; the requests in flight then finish (they are bounded by max_tokens).
// Each client keeps one keep-alive connection (see client() below). With --response-format
// (a JSON response_format object, e.g. a json_schema) every request asks for it: a reply the
// grammar ended (finish_reason stop) may be shorter than max_tokens, and must parse as JSON.
// With --schema-per-request each request's json_schema is a new one, as tool calls bring
// theirs: every property name gets the suffix _R (R counts the requests sent), in
// `properties` and `required` alike, so that no two requests share a grammar.
//
// Per request it records: time to first token (request sent -> the first data event carrying
// a choice), the gaps between consecutive such events (inter-token latencies, as the client
// sees them: events that arrive in one read are ~0 apart), the tokens it got (the usage
// chunk's completion_tokens) and errors: a status other than 200, a network failure or the
// timeout (default 600 s per request), a data event that is not JSON or an error object, no
// usage chunk, no `data: [DONE]` or anything after it, or fewer tokens than max_tokens (with
// ignore_eos every request should run to max_tokens).
//
// Prints one JSON object: clients, requests (finished without error), errors, error_kinds,
// first_error, output_tokens (all requests), wall_s (first request sent to last one ended),
// output_tok_per_s (output_tokens / wall_s), ttft_ms and itl_ms {p50, p99, max, mean, n}
// (percentiles by nearest rank, over the requests without error), events.
import { parseArgs } from 'node:util';

const DEFAULT_PROMPT =
    'Once upon a time, in a small village at the edge of a great forest, there lived a ' +
    'curious little fox named Pip who loved to explore.';

const { values: a } = parseArgs({
    options: {
        url: { type: 'string', default: 'http://127.0.0.1:8000' },
        clients: { type: 'string', default: '1' },
        duration: { type: 'string', default: '20' },
        requests: { type: 'string', default: '0' },
        'max-tokens': { type: 'string', default: '64' },
        prompt: { type: 'string', default: DEFAULT_PROMPT },
        temperature: { type: 'string', default: '0.8' },
        seed: { type: 'string', default: '1' },
        model: { type: 'string' },
        timeout: { type: 'string', default: '600' },
        'response-format': { type: 'string' },
        'schema-per-request': { type: 'boolean', default: false },
    },
});
const clients = Number(a.clients), duration = Number(a.duration) * 1000;
const perClient = Number(a.requests), maxTokens = Number(a['max-tokens']);
const timeoutMs = Number(a.timeout) * 1000, seedBase = Number(a.seed);
const url = a.url.replace(/\/$/, '') + '/v1/completions';
const responseFormat = a['response-format'] ? JSON.parse(a['response-format']) : null;

let sent = 0;

// The schema s with every property name suffixed by tag (a copy; s is not changed).
function renamed(s, tag) {
    if (Array.isArray(s)) return s.map((v) => renamed(v, tag));
    if (s === null || typeof s !== 'object') return s;
    const out = {};
    for (const [k, v] of Object.entries(s)) {
        if (k === 'properties' && v && typeof v === 'object' && !Array.isArray(v))
            out[k] = Object.fromEntries(Object.entries(v).map(([p, sub]) => [p + tag, renamed(sub, tag)]));
        else if (k === 'required' && Array.isArray(v)) out[k] = v.map((p) => p + tag);
        else out[k] = renamed(v, tag);
    }
    return out;
}

const ttft = [], itl = [];
const errorKinds = {};
let firstError = null, done = 0, errors = 0, outputTokens = 0, events = 0;

function fail(kind, detail) {
    errors++;
    errorKinds[kind] = (errorKinds[kind] || 0) + 1;
    if (!firstError) firstError = `${kind}: ${detail}`;
}

// One streaming request; its figures go into the totals above.
async function one(seed) {
    const body = {
        prompt: a.prompt, max_tokens: maxTokens, temperature: Number(a.temperature), seed,
        ignore_eos: true, stream: true, stream_options: { include_usage: true },
    };
    if (a.model) body.model = a.model;
    if (responseFormat) body.response_format = a['schema-per-request'] ? renamed(responseFormat, `_${++sent}`) : responseFormat;
    const t0 = performance.now();
    let res;
    try {
        res = await fetch(url, {
            method: 'POST', headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
        });
    } catch (e) {
        return fail(e.name === 'TimeoutError' ? 'timeout' : 'network', `${e.message} ${e.cause?.code ?? ''}`);
    }
    if (res.status !== 200) {
        const text = await res.text().catch(() => '');
        return fail(`http ${res.status}`, text.slice(0, 300));
    }
    let first = null, last = 0, got = 0, usage = null, sawDone = false, afterDone = false, bad = null;
    let text = '', finish = null;
    const gaps = [];
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let buf = '';
    const handle = (ev) => {
        for (const line of ev.split('\n')) {
            if (line === '' || line.startsWith(':')) continue; // comments: keep-alive
            if (!line.startsWith('data: ')) { bad ??= `not a data line: ${line.slice(0, 120)}`; continue; }
            const data = line.slice(6);
            if (sawDone) { afterDone = true; continue; }
            if (data === '[DONE]') { sawDone = true; continue; }
            let obj;
            try { obj = JSON.parse(data); } catch { bad ??= `not JSON: ${data.slice(0, 120)}`; continue; }
            if (obj.error) { bad ??= `error event: ${JSON.stringify(obj.error).slice(0, 200)}`; continue; }
            if (obj.usage) usage = obj.usage;
            if (Array.isArray(obj.choices) && obj.choices.length > 0) {
                if (typeof obj.choices[0].text !== 'string') { bad ??= `choice without text: ${data.slice(0, 120)}`; continue; }
                text += obj.choices[0].text;
                finish = obj.choices[0].finish_reason ?? finish;
                const now = performance.now();
                if (first === null) first = now - t0; else gaps.push(now - last);
                last = now;
                got++;
            } else if (!obj.usage) {
                bad ??= `event with neither a choice nor usage: ${data.slice(0, 120)}`;
            }
        }
    };
    try {
        const reader = res.body.getReader();
        for (;;) {
            const { value, done: end } = await reader.read();
            if (end) break;
            buf += decoder.decode(value, { stream: true });
            let k;
            while ((k = buf.indexOf('\n\n')) >= 0) {
                handle(buf.slice(0, k));
                buf = buf.slice(k + 2);
            }
        }
        buf += decoder.decode();
    } catch (e) {
        outputTokens += usage?.completion_tokens ?? got;
        return fail(e.name === 'TimeoutError' ? 'timeout' : 'stream', `${e.message} after ${got} events`);
    }
    events += got;
    outputTokens += usage?.completion_tokens ?? got;
    if (buf.trim() !== '') bad ??= `unterminated event at the end: ${buf.slice(0, 120)}`;
    if (bad) return fail('malformed', bad);
    if (!sawDone) return fail('no [DONE]', `stream ended after ${got} events`);
    if (afterDone) return fail('malformed', 'data after [DONE]');
    if (!usage) return fail('no usage', `${got} events`);
    const ended = responseFormat && finish === 'stop'; /* the grammar ended it */
    if (usage.completion_tokens !== maxTokens && !ended)
        return fail('short', `completion_tokens ${usage.completion_tokens}, max_tokens ${maxTokens}`);
    if (ended) {
        try { JSON.parse(text); } catch { return fail('invalid', `not JSON: ${text.slice(0, 160)}`); }
    }
    if (first !== null) ttft.push(first);
    itl.push(...gaps);
    done++;
}

async function client(c, start) {
    for (let i = 0; (!perClient || i < perClient) && performance.now() - start < duration; i++) {
        await one(seedBase + c * 1000003 + i);
        // Let fetch (undici) put the connection back in its pool before the next request:
        // sent at once, that request opens a second connection, so that N clients hold 2N,
        // and past 16 of them snug's --max-connections (default 32) leaves the new ones in
        // the accept backlog until an idle one times out (seconds of TTFT).
        await new Promise((resolve) => setImmediate(resolve));
    }
}

function pct(xs) {
    if (xs.length === 0) return { p50: null, p99: null, max: null, mean: null, n: 0 };
    const s = Float64Array.from(xs).sort();
    const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
    const r = (x) => Math.round(x * 100) / 100;
    const mean = s.reduce((t, x) => t + x, 0) / s.length;
    return { p50: r(at(0.5)), p99: r(at(0.99)), max: r(s[s.length - 1]), mean: r(mean), n: s.length };
}

const start = performance.now();
await Promise.all(Array.from({ length: clients }, (_, c) => client(c, start)));
const wall = (performance.now() - start) / 1000;
console.log(JSON.stringify({
    clients, requests: done, errors, error_kinds: errorKinds, first_error: firstError,
    output_tokens: outputTokens, wall_s: Math.round(wall * 1000) / 1000,
    output_tok_per_s: Math.round((outputTokens / wall) * 100) / 100,
    ttft_ms: pct(ttft), itl_ms: pct(itl), events,
}));
