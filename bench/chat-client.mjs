// bench/chat-client.mjs: the client of bench/chat (Node 20, no dependencies: the built-in fetch
// and its body stream). Three phases, one server each, JSON on stdout, progress on stderr:
//
//   node bench/chat-client.mjs caching --url URL [conversation options] [--prompt TEXT]
//   node bench/chat-client.mjs baseline --url URL --from CACHING.json [conversation options]
//   node bench/chat-client.mjs report --model LABEL=CACHING.json,BASELINE.json [--model ...]
//        [--command TEXT]
//
// Conversation options: --turns 5, --reps 3, --max-tokens 32, --system-sentences 16,
// --user-sentences 7, --vocab 128000 (token ids below it make the timed raw prompts),
// --timeout 600 (seconds per request).
//
// The conversation (both phases): a system message, then per turn a user message of
// --user-sentences sentences of plain story text; each turn is a streaming POST
// /v1/chat/completions of the whole history (temperature 0, ignore_eos so that every answer
// is --max-tokens long, stream_options.include_usage, logprobs with return_tokens_as_token_ids
// so that the ids can be compared); the answer's text becomes the next turn's assistant
// message. It runs --reps times; repetition r's system message opens with a name of its own,
// so that no repetition finds an earlier one's blocks in the cache (its first block differs)
// while every turn after the first can find its own history. Per turn and repetition: TTFT
// (request sent -> the first data event carrying a choice), prompt tokens, the usage's
// prompt_tokens_details.cached_tokens (null when the server does not report it), the ids
// and the text. One warm-up request comes first (a name no repetition uses, 2 tokens).
//
// caching adds "N = 1 with a repeated prompt": --prompt (~33 tokens) as a streaming POST
// /v1/completions with max_tokens 1, sent 1 + --reps + 2 times in a row; the first computes
// it, the rest may be served from the cache (TTFT and cached_tokens of each); and one decode
// step: the mean inter-token latency (first token to last / 31) of a streaming completion of
// the same prompt with 32 tokens (ignore_eos).
//
// baseline (meant for the server without caching) adds the prefill references: from the
// caching run (--from), the tokens turn 5 computed (its prompt tokens - cached tokens, the
// median over repetitions; when the server reported no cached_tokens, estimated as the
// prompt less turn 4's prompt in whole blocks of 16) and the repeated prompt's uncached tail
// (its tokens - cached tokens; estimated as the tokens past its whole blocks, at most
// prompt - 1 of them, when not reported); each is timed as the TTFT of a streaming POST
// /v1/completions whose prompt is that many token ids (fresh, random below --vocab, new
// each time), max_tokens 1, --reps + 2 times, median.
//
// report prints the markdown table (per model and turn: prompt tokens, cached tokens, tokens
// computed, TTFT with and without caching (medians over the repetitions) and their ratio,
// greedy ids and text the same with caching on and off), then the goals, met or MISSED:
// turn 5's TTFT with caching <= 0.25x without; <= 1.3x the time to prefill its new tokens
// alone; the repeated prompt's TTFT (median of the repeats) <= 1.3x one decode step + the
// prefill of its uncached tail. It exits 0 whatever the goals say.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';

const { values: a, positionals } = parseArgs({
    allowPositionals: true,
    options: {
        url: { type: 'string', default: 'http://127.0.0.1:8000' },
        turns: { type: 'string', default: '5' },
        reps: { type: 'string', default: '3' },
        'max-tokens': { type: 'string', default: '32' },
        'system-sentences': { type: 'string', default: '16' },
        'user-sentences': { type: 'string', default: '7' },
        vocab: { type: 'string', default: '128000' },
        prompt: { type: 'string' },
        from: { type: 'string' },
        model: { type: 'string', multiple: true, default: [] },
        command: { type: 'string' },
        timeout: { type: 'string', default: '600' },
    },
});
const phase = positionals[0];
const base = a.url.replace(/\/$/, '');
const turns = Number(a.turns), reps = Number(a.reps), maxTokens = Number(a['max-tokens']);
const timeoutMs = Number(a.timeout) * 1000;
const BLOCK = 16; // snug's KV block, in tokens

const NAMES = ['Lily', 'Tom', 'Sue', 'Ben', 'Mia', 'Max', 'Zoe', 'Sam', 'Amy', 'Tim', 'Ann', 'Joe'];
// Plain story text, which every tokenizer here (the bundled model's 512 pieces too) reads well.
const SENTENCES = [
    'One sunny morning, the little girl went to the park with her mom and her red ball.',
    'She saw a big tree with green leaves and a small bird sitting on a branch.',
    'The bird sang a happy song, and the girl clapped her hands and laughed.',
    'Her mom smiled and said that they could have a picnic under the tree.',
    'They sat on a soft blanket and ate bread, apples and cookies together.',
    'A friendly dog came running across the grass and wagged its long tail.',
    'The girl gave the dog a piece of bread, and the dog was very happy.',
    'Then the sky turned gray, and a cold wind began to blow the leaves around.',
    'They packed their things quickly and walked home before the rain came.',
    'At home, the girl drew a picture of the bird, the dog and the big tree.',
    'Her dad looked at the picture and told her it was the best one he had ever seen.',
    'The next day, the boy next door asked if he could play with her in the garden.',
    'They built a little house out of sticks and stones for a family of bugs.',
    'When the sun went down, they sat on the steps and counted the first stars.',
    'The old cat from the farm came to sleep by the warm fire every night.',
    'One day the cat found a tiny mouse who was lost and could not find its home.',
    'The cat did not chase the mouse, but helped it look for its family instead.',
    'They walked past the pond, where a duck and her babies were swimming slowly.',
    'The duck told them that she had seen a small hole near the big red barn.',
    'When they got to the barn, the mouse found its mother and its brothers there.',
    'Everyone was so glad, and they shared a piece of cheese to say thank you.',
    'The cat went back to the fire and thought about the new friends it had made.',
    'In the morning, the farmer gave the cat a bowl of fresh milk for being kind.',
    'From that day on, the cat and the mouse met by the pond every afternoon.',
];

function userText(turn) {
    const k = Number(a['user-sentences']);
    const out = [`Please tell me more about part ${turn + 1} of the story.`];
    for (let i = 0; i < k; i++) out.push(SENTENCES[(7 + turn * k + i) % SENTENCES.length]);
    return out.join(' ');
}

function systemText(name) {
    const k = Number(a['system-sentences']);
    const out = [`${name} is the hero of the story you tell.`, 'You are a kind storyteller for small children.'];
    for (let i = 0; i < k; i++) out.push(SENTENCES[i % SENTENCES.length]);
    return out.join(' ');
}

const log = (...xs) => process.stderr.write(xs.join(' ') + '\n');
const median = (xs) => {
    const s = xs.filter((x) => x !== null && x !== undefined && !Number.isNaN(x)).sort((p, q) => p - q);
    if (s.length === 0) return null;
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const r2 = (x) => (x === null || x === undefined ? null : Math.round(x * 100) / 100);

// One streaming POST to path; returns { ttft_ms, gaps_ms, usage, text, ids }. Throws on any
// error (a status other than 200, an error event, no usage, no [DONE]).
async function stream(path, body) {
    const t0 = performance.now();
    const res = await fetch(base + path, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
        signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    let first = null, last = 0, usage = null, sawDone = false, text = '', buf = '';
    const gaps = [], ids = [];
    const handle = (ev) => {
        for (const line of ev.split('\n')) {
            if (line === '' || line.startsWith(':')) continue;
            if (!line.startsWith('data: ')) throw new Error(`${path}: not a data line: ${line.slice(0, 120)}`);
            const data = line.slice(6);
            if (data === '[DONE]') { sawDone = true; continue; }
            const obj = JSON.parse(data);
            if (obj.error) throw new Error(`${path}: error event: ${JSON.stringify(obj.error).slice(0, 300)}`);
            if (obj.usage) usage = obj.usage;
            const c = obj.choices?.[0];
            if (!c) continue;
            const now = performance.now();
            if (first === null) first = now - t0; else gaps.push(now - last);
            last = now;
            text += c.delta?.content ?? c.text ?? '';
            const lp = c.logprobs;
            const names = lp?.content ? lp.content.map((e) => e.token) : (lp?.tokens ?? []);
            for (const n of names) ids.push(Number(String(n).replace(/^token_id:/, '')));
        }
    };
    const reader = res.body.getReader();
    const decoder = new TextDecoder('utf-8');
    for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) { handle(buf.slice(0, k)); buf = buf.slice(k + 2); }
    }
    if (!sawDone) throw new Error(`${path}: the stream ended without data: [DONE]`);
    if (!usage) throw new Error(`${path}: no usage chunk`);
    return { ttft_ms: first, gaps_ms: gaps, usage, text, ids };
}

const cachedOf = (usage) => usage.prompt_tokens_details?.cached_tokens ?? null;

function chatBody(messages, max) {
    return {
        messages, max_tokens: max, temperature: 0, ignore_eos: true,
        logprobs: true, top_logprobs: 0, return_tokens_as_token_ids: true,
    };
}

// The conversations: reps x turns requests; returns [rep][turn] records.
async function conversations(label) {
    await stream('/v1/chat/completions', chatBody([
        { role: 'system', content: systemText('Kim') }, { role: 'user', content: userText(0) }], 2));
    const out = [];
    for (let r = 0; r < reps; r++) {
        const name = NAMES[r % NAMES.length] + (r >= NAMES.length ? ` ${r}` : '');
        const messages = [{ role: 'system', content: systemText(name) }];
        const rec = [];
        for (let t = 0; t < turns; t++) {
            messages.push({ role: 'user', content: userText(t) });
            const s = await stream('/v1/chat/completions', chatBody(messages, maxTokens));
            if (s.usage.completion_tokens !== maxTokens)
                throw new Error(`turn ${t + 1}: ${s.usage.completion_tokens} tokens, not ${maxTokens}`);
            const cached = cachedOf(s.usage);
            rec.push({ prompt_tokens: s.usage.prompt_tokens, cached_tokens: cached,
                       ttft_ms: r2(s.ttft_ms), ids: s.ids, text: s.text });
            log(`   ${label} rep ${r + 1} turn ${t + 1}: prompt ${s.usage.prompt_tokens} tokens, cached`,
                `${cached ?? '-'}, TTFT ${s.ttft_ms.toFixed(0)} ms`);
            messages.push({ role: 'assistant', content: s.text });
        }
        out.push(rec);
    }
    return out;
}

function completionBody(prompt, max) {
    return { prompt, max_tokens: max, temperature: 0, ignore_eos: true };
}

// A fresh prompt of n token ids below --vocab, from a counter-based generator.
let idSeed = 0x9e3779b9;
function freshIds(n) {
    const vocab = Number(a.vocab), ids = [];
    for (let i = 0; i < n; i++) {
        idSeed = (Math.imul(idSeed ^ (idSeed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
        ids.push(3 + (idSeed % (vocab - 3)));
    }
    return ids;
}

// The median TTFT of a fresh n-token prompt, max_tokens 1, over --reps + 2 requests.
async function prefill(n, label) {
    const ttft = [];
    for (let i = 0; i < reps + 2; i++) {
        const s = await stream('/v1/completions', completionBody(freshIds(n), 1));
        if (s.usage.prompt_tokens !== n) throw new Error(`prefill: prompt_tokens ${s.usage.prompt_tokens}, sent ${n}`);
        ttft.push(r2(s.ttft_ms));
    }
    log(`   prefill of ${n} fresh tokens (${label}): TTFT ${ttft.join(', ')} ms`);
    return { tokens: n, ttft_ms: ttft, p50_ms: r2(median(ttft)) };
}

async function caching() {
    if (!a.prompt) throw new Error('caching: --prompt TEXT is needed');
    const conv = await conversations('caching');
    // N = 1 with a repeated prompt
    const sends = [];
    for (let i = 0; i < reps + 3; i++) {
        const s = await stream('/v1/completions', completionBody(a.prompt, 1));
        sends.push({ prompt_tokens: s.usage.prompt_tokens, cached_tokens: cachedOf(s.usage), ttft_ms: r2(s.ttft_ms) });
    }
    log(`   repeated prompt of ${sends[0].prompt_tokens} tokens: TTFT ${sends.map((s) => s.ttft_ms).join(', ')} ms;`,
        `cached ${sends.map((s) => s.cached_tokens ?? '-').join(', ')}`);
    const d = await stream('/v1/completions', completionBody(a.prompt + ' And then', 32));
    // the mean gap, first token to last: events that arrive in one read are ~0 apart, so that
    // a fast model's p50 gap can be 0
    const step = r2(d.gaps_ms.reduce((t, x) => t + x, 0) / d.gaps_ms.length);
    log(`   decode step (mean inter-token latency over ${d.gaps_ms.length} gaps): ${step} ms;`,
        `p50 ${r2(median(d.gaps_ms))} ms`);
    return { conversations: conv, repeat: { sends, decode_step_ms: step, itl_p50_ms: r2(median(d.gaps_ms)) } };
}

async function baseline() {
    if (!a.from) throw new Error('baseline: --from CACHING.json is needed');
    const c = JSON.parse(readFileSync(a.from, 'utf8'));
    const conv = await conversations('no caching');
    const last = turns - 1;
    const t5 = c.conversations.map((rec) => rec[last]);
    let newTokens, estimated = false;
    if (t5.every((x) => x.cached_tokens !== null)) {
        newTokens = Math.round(median(t5.map((x) => x.prompt_tokens - x.cached_tokens)));
    } else {
        estimated = true;
        newTokens = Math.round(median(c.conversations.map((rec) =>
            rec[last].prompt_tokens - Math.floor(rec[last - 1].prompt_tokens / BLOCK) * BLOCK)));
    }
    const rs = c.repeat.sends.slice(1);
    let tail, tailEstimated = false;
    if (rs.every((x) => x.cached_tokens !== null)) {
        tail = Math.round(median(rs.map((x) => x.prompt_tokens - x.cached_tokens)));
    } else {
        tailEstimated = true;
        const p = c.repeat.sends[0].prompt_tokens;
        tail = p - Math.floor((p - 1) / BLOCK) * BLOCK;
    }
    const newPrefill = await prefill(Math.max(1, newTokens), `turn ${turns}'s new tokens`);
    const tailPrefill = await prefill(Math.max(1, tail), 'the repeated prompt\'s uncached tail');
    return { conversations: conv, new_tokens: { ...newPrefill, estimated },
             tail: { ...tailPrefill, estimated: tailEstimated } };
}

const fmt = (x, d = 0) => (x === null || x === undefined ? '-' : x.toFixed(d));
const verdict = (v, goal) => (v === null ? 'not measured' : `${v.toFixed(2)}: ${v <= goal ? 'met' : 'MISSED'} (goal <= ${goal})`);

function report() {
    const models = a.model.map((m) => {
        const [label, files] = m.split('=');
        const [on, off] = files.split(',').map((f) => JSON.parse(readFileSync(f, 'utf8')));
        return { label, on, off };
    });
    if (a.command) console.log(`\n    ${a.command}\n`);
    console.log('| model | turn | prompt tokens | cached tokens | tokens computed | TTFT with caching (ms) |' +
                ' TTFT without (ms) | with / without | greedy ids and text |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    const goals = [];
    for (const { label, on, off } of models) {
        const nt = on.conversations[0].length;
        let allSame = true;
        const row = [];
        for (let t = 0; t < nt; t++) {
            const ons = on.conversations.map((rec) => rec[t]), offs = off.conversations.map((rec) => rec[t]);
            const prompt = median(ons.map((x) => x.prompt_tokens));
            const cached = ons.some((x) => x.cached_tokens === null) ? null : median(ons.map((x) => x.cached_tokens));
            const tOn = median(ons.map((x) => x.ttft_ms)), tOff = median(offs.map((x) => x.ttft_ms));
            const same = ons.every((x, r) => offs[r] && offs[r].prompt_tokens === x.prompt_tokens &&
                JSON.stringify(offs[r].ids) === JSON.stringify(x.ids) && offs[r].text === x.text);
            allSame &&= same;
            row.push({ tOn, tOff });
            console.log(`| ${label} | ${t + 1} | ${fmt(prompt)} | ${fmt(cached)} | ` +
                `${cached === null ? '-' : fmt(prompt - cached)} | ${fmt(tOn)} | ${fmt(tOff)} | ` +
                `${fmt(tOn / tOff, 2)} | ${same ? 'same' : 'DIFFERENT'} |`);
        }
        const last = row[nt - 1];
        const nw = off.new_tokens, tl = off.tail, rp = on.repeat;
        const repeatTtft = median(rp.sends.slice(1).map((s) => s.ttft_ms));
        const ref = rp.decode_step_ms + tl.p50_ms;
        goals.push(`${label}: turn ${nt} TTFT with caching / without: ${fmt(last.tOn)} / ${fmt(last.tOff)} ms = ` +
            verdict(last.tOn / last.tOff, 0.25));
        goals.push(`${label}: turn ${nt} TTFT with caching / the prefill of its ${nw.tokens} new tokens alone` +
            `${nw.estimated ? ' (estimated: the server reported no cached_tokens; turn 5 less turn 4\'s prompt in whole blocks)' : ''}: ` +
            `${fmt(last.tOn)} / ${fmt(nw.p50_ms)} ms = ${verdict(last.tOn / nw.p50_ms, 1.3)}`);
        goals.push(`${label}: N = 1, a ${rp.sends[0].prompt_tokens}-token prompt repeated: TTFT ${fmt(repeatTtft)} ms ` +
            `(first send ${fmt(rp.sends[0].ttft_ms)} ms; cached tokens ${rp.sends.slice(1).map((s) => s.cached_tokens ?? '-').join(', ')}) ` +
            `/ (one decode step ${fmt(rp.decode_step_ms, 1)} ms + the prefill of its ${tl.tokens}-token uncached tail ` +
            `${fmt(tl.p50_ms, 1)} ms${tl.estimated ? ', estimated' : ''}) = ${verdict(repeatTtft / ref, 1.3)}` +
            ` [the tail's prefill alone: ${fmt(repeatTtft / tl.p50_ms, 2)}]`);
        goals.push(`${label}: greedy ids and text with caching on and off over ${on.conversations.length} ` +
            `conversations of ${nt} turns: ${allSame ? 'same' : 'DIFFERENT'}`);
    }
    console.log('');
    for (const g of goals) console.log(g);
}

try {
    if (phase === 'caching') console.log(JSON.stringify(await caching()));
    else if (phase === 'baseline') console.log(JSON.stringify(await baseline()));
    else if (phase === 'report') report();
    else throw new Error('usage: node bench/chat-client.mjs caching|baseline|report [options] (see the header)');
} catch (e) {
    log(`bench/chat-client: ${e.message}${e.cause ? ` (${e.cause.code ?? e.cause.message})` : ''}`);
    process.exit(1);
}
