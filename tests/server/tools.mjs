// Tool calls in the model's own format: `snug serve` reads the tool-call format from the chat
// template it serves, once at start, and uses it to constrain "required" and named calls, to read
// a reply's calls and to hold a stream's calls back. The bundled model (models/stories260K, random
// as far as tools go, sampled at temperature 1) is served twice:
//   1. under tests/data/chat/hermes-tools.jinja (Hermes/Qwen style, <tool_call>):
//      - tool_choice "required" (one call; several) and a named function, streamed and not: the
//        generated text (the reply's log-probabilities' bytes, joined) is Hermes calls,
//        <tool_call>\n{...}\n</tool_call>, the grammar alone making it so; the reply has them as
//        message.tool_calls (or a stream's tool-call deltas), the same names and arguments as the
//        text's, finish_reason "tool_calls", no content; no <tool_call> text in a content delta;
//      - a plain reply (no tools; tools with "auto"; tools with "none"): content, no tool_calls;
//        streamed, the same text as not;
//   2. under tests/data/chat/mistral-tools.jinja ([TOOL_CALLS]): "required" and a named function,
//      streamed and not: the text starts "[TOOL_CALLS] [", the calls come back as tool_calls with
//      Mistral's 9-character ids.
// Each server: a free port of 127.0.0.1, --max-model-len 512, --threads 1, --no-access-log; it must
// exit 0 on SIGTERM.
//
// Usage: node tests/server/tools.mjs BUILD_DIR (default build), from anywhere. Prints one
// "ok - ..." / "FAIL - ..." line per check and a final "N passed, M failed" (see tests/run); exit
// status 1 if any failed. A watchdog fails the file at 100 s. Only node's built-in modules.
import { addToolCallDelta, check, show, postJson, Server, run } from '../lib/harness.mjs';

const REQUEST_MS = 30_000;
const MAX_TOKENS = 200;
const SEEDS = [1, 2, 3, 4, 5];
const PARALLEL_SEEDS = [4, 23, 26];

// Two tools whose parameters bound every string, so that a call fits in MAX_TOKENS.
const TOOLS = [
    { type: 'function', function: { name: 'get_weather', description: 'the weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] } } },
    { type: 'function', function: { name: 'add', description: 'a sum',
        parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'boolean' } },
            required: ['a', 'b'], additionalProperties: false } } },
];

// ---- requests -------------------------------------------------------------------------------

let base = ''; // http://HOST:PORT of the server running

const post = (endpoint, body) => postJson(base, endpoint, body, REQUEST_MS);

// textOf(items): the generated text, from chat log-probabilities' items (their bytes joined)
const textOf = (items) => Buffer.from(items.flatMap((t) => t.bytes ?? [])).toString('utf8');

// chat(fields): a chat completion with these fields, with log-probabilities; {text (what the
// model generated), content (null when none), calls [{id, type, name, arguments}], finish,
// contentDeltas (streamed: each content delta)}, or {error}
async function chat(fields) {
    const body = { messages: [{ role: 'user', content: 'Call a tool.' }], max_tokens: MAX_TOKENS, temperature: 1,
        logprobs: true, ...fields };
    const r = await post('/v1/chat/completions', body);
    if (r.status !== 200) return { error: `HTTP ${r.status}: ${r.raw.slice(0, 600)}` };
    try {
        if (!body.stream) {
            const c = JSON.parse(r.raw).choices[0];
            const calls = (c.message.tool_calls ?? []).map((t) => ({ id: t.id, type: t.type, ...t.function }));
            return { text: textOf(c.logprobs.content), content: c.message.content, calls, finish: c.finish_reason,
                hasCalls: 'tool_calls' in c.message && c.message.tool_calls !== null };
        }
        const events = r.raw.split('\n\n').filter((e) => e.trim());
        if (events.at(-1)?.trim() !== 'data: [DONE]') return { error: `no [DONE]: ${show(r.raw.slice(-200))}` };
        const out = { text: '', content: null, calls: [], finish: null, contentDeltas: [], hasCalls: false };
        const items = [];
        for (const e of events.slice(0, -1)) {
            const c = JSON.parse(e.slice(6)).choices[0];
            if (!c) continue;
            items.push(...(c.logprobs?.content ?? []));
            if (typeof c.delta.content === 'string' && c.delta.content !== '') {
                out.contentDeltas.push(c.delta.content);
                out.content = (out.content ?? '') + c.delta.content;
            }
            for (const t of c.delta.tool_calls ?? []) {
                out.hasCalls = true;
                addToolCallDelta(out.calls, t);
            }
            out.finish = c.finish_reason ?? out.finish;
        }
        out.text = textOf(items);
        return out;
    } catch (e) {
        return { error: `${e.message}: ${r.raw.slice(0, 600)}` };
    }
}

// hermesCalls(text): the calls a Hermes text writes, [{name, arguments}] (arguments parsed), or
// null when the text is not exactly <tool_call> blocks (the end-of-sequence token's piece after
// them aside)
function hermesCalls(text) {
    const calls = [];
    let at = 0;
    while (text.startsWith('<tool_call>\n', at)) {
        const end = text.indexOf('\n</tool_call>', at); // a JSON string has no raw newline
        if (end < 0) return null;
        const v = JSON.parse(text.slice(at + 12, end));
        calls.push({ name: v.name, arguments: v.arguments });
        at = end + 13;
        if (text[at] === '\n') at++;
    }
    return calls.length && /^(?:<\/?s>|<\|[a-z_]+\|>)?$/.test(text.slice(at)) ? calls : null;
}

// mistralCalls(text): the calls a Mistral text writes ("[TOOL_CALLS] [...]"), or null
function mistralCalls(text) {
    const m = /^\[TOOL_CALLS\] (\[[\s\S]*\])(?:<\/?s>)?$/.exec(text);
    if (!m) return null;
    return JSON.parse(m[1]).map((v) => ({ name: v.name, arguments: v.arguments }));
}

// callsFailure(a, readText, idPattern, only, one): null when reply a is calls in the format
// (readText finds them in the generated text), the same as its tool_calls, with no content
function callsFailure(a, readText, idPattern, only, one) {
    if (a.error) return a.error;
    let inText;
    try {
        inText = readText(a.text);
    } catch (e) {
        inText = null;
    }
    if (!inText) return `the generated text is not calls in the template's format: ${show(a.text)}`;
    if (a.finish !== 'tool_calls') return `finish_reason ${show(a.finish)}, not "tool_calls"; text ${show(a.text)}`;
    if (a.content) return `content ${show(a.content)} beside the calls`;
    if (a.contentDeltas?.length) return `content deltas ${show(a.contentDeltas)}`;
    if (a.calls.length !== inText.length || (one && a.calls.length !== 1))
        return `${a.calls.length} tool_calls, ${inText.length} in the text ${show(a.text)}`;
    for (const [k, c] of a.calls.entries()) {
        if (!idPattern.test(c.id) || c.type !== 'function') return `id ${show(c.id)}, type ${show(c.type)}`;
        if (only && c.name !== only) return `a call of ${show(c.name)}, not ${only}`;
        if (!TOOLS.some((t) => t.function.name === c.name)) return `a call of ${show(c.name)}`;
        let args;
        try {
            args = JSON.parse(c.arguments);
        } catch (e) {
            return `arguments ${show(c.arguments)} do not parse`;
        }
        if (c.name !== inText[k].name || JSON.stringify(args) !== JSON.stringify(inText[k].arguments))
            return `call ${k}: ${c.name}(${c.arguments}), the text has ${inText[k].name}(${show(inText[k].arguments)})`;
    }
    return null;
}

// plainFailure(a): null when reply a is content only
function plainFailure(a) {
    if (a.error) return a.error;
    if (a.hasCalls) return `tool_calls ${show(a.calls)}`;
    if (typeof a.content !== 'string' || a.content === '') return `content ${show(a.content)}`;
    if (a.finish !== 'stop' && a.finish !== 'length') return `finish_reason ${show(a.finish)}`;
    return null;
}

// ---- the checks -----------------------------------------------------------------------------

async function callsChecks(format, readText, idPattern, parallel) {
    for (const stream of [false, true]) {
        const how = stream ? ', streamed' : '';
        for (const seed of SEEDS) {
            const a = await chat({ tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, seed, stream });
            check(`${format}: "required", one call${how}, seed ${seed}: ${format} calls in the text, read as tool_calls`,
                callsFailure(a, readText, idPattern, null, true), a.calls?.map((c) => `${c.name}(${c.arguments})`).join(' '));
        }
        const named = await chat({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'add' } }, seed: 9,
            stream });
        check(`${format}: a named function${how}: one call of it, read from the text`,
            callsFailure(named, readText, idPattern, 'add', true), named.calls?.[0]?.arguments);
        if (parallel) {
            // seeds whose replies are two calls on the bundled model (the others are mostly one)
            let most = 0;
            for (const seed of PARALLEL_SEEDS) {
                const several = await chat({ tools: TOOLS, tool_choice: 'required', seed, stream });
                check(`${format}: "required", parallel calls allowed${how}, seed ${seed}: every call read from the text`,
                    callsFailure(several, readText, idPattern, null, false), `${several.calls?.length} calls`);
                most = Math.max(most, several.calls?.length ?? 0);
            }
            check(`${format}: "required", parallel calls allowed${how}: some reply is several calls`,
                most >= 2 ? null : `at most ${most} calls in a reply`, `at most ${most}`);
        }
    }
}

async function plainChecks(format) {
    const cases = [['no tools', {}], ['tools, "auto"', { tools: TOOLS }], ['tools, "none"', { tools: TOOLS, tool_choice: 'none' }]];
    for (const [what, fields] of cases) {
        const a = await chat({ ...fields, max_tokens: 24, seed: 11 });
        check(`${format}: a plain reply (${what}): content, no tool_calls`, plainFailure(a), show(a.content));
        const s = await chat({ ...fields, max_tokens: 24, seed: 11, stream: true });
        check(`${format}: a plain reply (${what}), streamed: the same content`,
            plainFailure(s) ?? (s.content === a.content ? null : `${show(s.content)}, not ${show(a.content)}`));
    }
}

// ---- the server -----------------------------------------------------------------------------

let server = null; // the one running

async function main() {
    const runs = [
        ['hermes', 'tests/data/chat/hermes-tools.jinja', hermesCalls, /^call_[A-Za-z0-9]{24}$/, true],
        ['mistral', 'tests/data/chat/mistral-tools.jinja', mistralCalls, /^[A-Za-z0-9]{9}$/, false],
    ];
    for (const [format, template, readText, idPattern, parallel] of runs) {
        server = new Server(['--threads', '1', '--memory', '256MiB', '--max-model-len', '512', '--no-access-log',
            '--chat-template', template], `the server with --chat-template ${template}`);
        if (!(await server.start())) return;
        base = server.base;
        const t0 = performance.now();
        await callsChecks(format, readText, idPattern, parallel);
        if (server.running) await plainChecks(format);
        console.log(`# ${format}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        await server.stop();
    }
}

run(main, { servers: () => [server] });
