// bench/adversarial-load.mjs: does a plain request keep its speed beside clients whose grammars
// defeat the mask cache? (issue 32: "a plain request beside 32 adversarial grammars keeps
// >= 0.8 of its tokens/s alone"). Node 20, no dependencies.
//
//   node bench/adversarial-load.mjs --url http://127.0.0.1:PORT [--clients N] [--probes K]
//        [--probe-max-tokens M] [--adversarial-max-tokens A] [--prompt TEXT] [--timeout S]
//        [--warmup-timeout S]
//
// The probe: a streaming POST /v1/completions (the prompt, max_tokens M (64), temperature 0,
// ignore_eos, stream_options.include_usage); its tokens/s is completion_tokens over the time
// from sending it to its stream's end. It runs K (3) times alone, one after another; then N
// (32) clients start, each looping over non-streaming completions (max_tokens A (16),
// temperature 1, a seed of its own per request) under the adversarial grammar
//
//   root ::= c0 c1 c2 c3 c4 c5 c6 c0 c1 ... (the seven, 400 times)    cN ::= [^"x]   (N = 0..6)
//
// in which every token reaches a matcher state not seen before, so that every mask is a fresh
// walk of the vocabulary; once /metrics shows their walks under way (or after
// --warmup-timeout, 60 s) the probe runs K more times beside them. Then every adversarial
// request in flight is aborted (AbortController), not waited for.
//
// While the probes run beside, /metrics is read every 250 ms: snug_grammar_sequences_waiting
// (max and mean over the samples); snug_grammar_mask_walks_total and
// snug_grammar_mask_walk_seconds_total are differenced over the probes beside.
//
// Prints one JSON object: alone and beside {runs: [{tok_s, tokens, ttft_ms, s}], best,
// median} (tokens/s), ratio_best (best beside / best alone), ratio_median, adversarial
// {clients, requests, errors, error_kinds, first_error}, metrics {mask_walks,
// mask_walk_seconds, sequences_waiting_max, sequences_waiting_mean, samples}, probe_errors.
// A probe that fails (status, stream, fewer tokens than M) is counted in probe_errors and
// left out of best and median.
import { parseArgs } from 'node:util';

const DEFAULT_PROMPT =
    'Once upon a time, in a small village at the edge of a great forest, there lived a ' +
    'curious little fox named Pip who loved to explore.';

const { values: a } = parseArgs({
    options: {
        url: { type: 'string', default: 'http://127.0.0.1:8000' },
        clients: { type: 'string', default: '32' },
        probes: { type: 'string', default: '3' },
        'probe-max-tokens': { type: 'string', default: '64' },
        'adversarial-max-tokens': { type: 'string', default: '16' },
        prompt: { type: 'string', default: DEFAULT_PROMPT },
        timeout: { type: 'string', default: '600' },
        'warmup-timeout': { type: 'string', default: '60' },
    },
});
const base = a.url.replace(/\/$/, '');
const url = base + '/v1/completions';
const clients = Number(a.clients), probes = Number(a.probes);
const probeMax = Number(a['probe-max-tokens']), advMax = Number(a['adversarial-max-tokens']);
const timeoutMs = Number(a.timeout) * 1000, warmupMs = Number(a['warmup-timeout']) * 1000;

const rules = Array.from({ length: 7 }, (_, i) => `c${i}`);
const GRAMMAR = `root ::=${` ${rules.join(' ')}`.repeat(400)}\n` +
    rules.map((r) => `${r} ::= [^"x]\n`).join('');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The unlabelled samples of /metrics, by name (a failed read gives {}).
async function metrics() {
    try {
        const res = await fetch(base + '/metrics', { signal: AbortSignal.timeout(10000) });
        const text = await res.text();
        const m = {};
        for (const line of text.split('\n')) {
            const f = line.split(' ');
            if (f.length === 2 && !line.startsWith('#')) m[f[0]] = Number(f[1]);
        }
        return m;
    } catch {
        return {};
    }
}

// One probe: a plain streaming completion, timed from sending to the stream's end.
async function probe() {
    const body = {
        prompt: a.prompt, max_tokens: probeMax, temperature: 0, ignore_eos: true, stream: true,
        stream_options: { include_usage: true },
    };
    const t0 = performance.now();
    let first = null, usage = null, buf = '';
    const res = await fetch(url, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status !== 200) throw new Error(`http ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
        buf += decoder.decode(chunk, { stream: true });
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, k);
            buf = buf.slice(k + 2);
            for (const line of ev.split('\n')) {
                if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
                const obj = JSON.parse(line.slice(6));
                if (obj.error) throw new Error(`error event: ${JSON.stringify(obj.error).slice(0, 200)}`);
                if (obj.usage) usage = obj.usage;
                if (first === null && obj.choices?.length) first = performance.now() - t0;
            }
        }
    }
    const s = (performance.now() - t0) / 1000;
    const tokens = usage?.completion_tokens ?? 0;
    if (tokens !== probeMax) throw new Error(`completion_tokens ${tokens}, max_tokens ${probeMax}`);
    return { tok_s: round(tokens / s), tokens, ttft_ms: round(first ?? 0), s: round(s) };
}

const round = (x) => Math.round(x * 100) / 100;
let probeErrors = 0, firstProbeError = null;

// K probes one after another; failed ones are counted and left out.
async function probeRuns() {
    const runs = [];
    for (let i = 0; i < probes; i++) {
        try {
            runs.push(await probe());
        } catch (e) {
            probeErrors++;
            firstProbeError ??= `${e.name}: ${e.message}`;
        }
    }
    const xs = runs.map((r) => r.tok_s).sort((x, y) => x - y);
    const median = xs.length === 0 ? null : xs.length % 2 ? xs[(xs.length - 1) / 2]
        : round((xs[xs.length / 2 - 1] + xs[xs.length / 2]) / 2);
    return { runs, best: xs.length ? xs[xs.length - 1] : null, median };
}

// The adversarial clients: each loops until stop, every request under GRAMMAR.
const stop = new AbortController();
const adv = { clients, requests: 0, errors: 0, error_kinds: {}, first_error: null };
async function adversary(c) {
    for (let i = 0; !stop.signal.aborted; i++) {
        const body = {
            prompt: a.prompt, max_tokens: advMax, temperature: 1, seed: 1 + c * 1000003 + i,
            structured_outputs: { grammar: GRAMMAR },
        };
        try {
            const res = await fetch(url, {
                method: 'POST', headers: { 'Content-Type': 'application/json' },
                body: JSON.stringify(body), signal: stop.signal,
            });
            const text = await res.text();
            if (res.status === 200) {
                adv.requests++;
            } else {
                adv.errors++;
                adv.error_kinds[`http ${res.status}`] = (adv.error_kinds[`http ${res.status}`] || 0) + 1;
                adv.first_error ??= `http ${res.status}: ${text.slice(0, 300)}`;
                await sleep(100);
            }
        } catch (e) {
            if (stop.signal.aborted) break; /* aborted at the end: not an error */
            adv.errors++;
            adv.error_kinds[e.name] = (adv.error_kinds[e.name] || 0) + 1;
            adv.first_error ??= `${e.name}: ${e.message}`;
            await sleep(100);
        }
        await new Promise((resolve) => setImmediate(resolve)); /* the connection back to its pool */
    }
}

const alone = await probeRuns();
const w0 = (await metrics()).snug_grammar_mask_walks_total ?? 0;
const running = Array.from({ length: clients }, (_, c) => adversary(c));
for (const t = performance.now(); performance.now() - t < warmupMs;) { /* their walks under way */
    await sleep(250);
    if (((await metrics()).snug_grammar_mask_walks_total ?? 0) > w0 + clients) break;
}
const m0 = await metrics();
const waiting = [];
let sampling = true;
const sampler = (async () => {
    while (sampling) {
        const v = (await metrics()).snug_grammar_sequences_waiting;
        if (v !== undefined) waiting.push(v);
        await sleep(250);
    }
})();
const beside = await probeRuns();
const m1 = await metrics();
sampling = false;
await sampler;
stop.abort();
await Promise.allSettled(running);

const diff = (k) => round((m1[k] ?? 0) - (m0[k] ?? 0));
console.log(JSON.stringify({
    alone, beside,
    ratio_best: alone.best && beside.best !== null ? Math.round((beside.best / alone.best) * 1000) / 1000 : null,
    ratio_median: alone.median && beside.median !== null ? Math.round((beside.median / alone.median) * 1000) / 1000 : null,
    adversarial: adv,
    metrics: {
        mask_walks: diff('snug_grammar_mask_walks_total'),
        mask_walk_seconds: Math.round(((m1.snug_grammar_mask_walk_seconds_total ?? 0) -
                                       (m0.snug_grammar_mask_walk_seconds_total ?? 0)) * 1000) / 1000,
        sequences_waiting_max: waiting.length ? Math.max(...waiting) : null,
        sequences_waiting_mean: waiting.length ? round(waiting.reduce((s, x) => s + x, 0) / waiting.length) : null,
        samples: waiting.length,
    },
    probe_errors: probeErrors, first_probe_error: firstProbeError,
}));
