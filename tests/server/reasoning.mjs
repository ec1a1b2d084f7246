// Reasoning output: a thinking model's reply split into reasoning_content (and reasoning, vLLM's
// newer name) and content, whole and streamed; thinking_token_budget (the engine closes the think
// block with forced tokens); chat_template_kwargs (enable_thinking) reaching the template; tool
// calls after a think block; --reasoning-format none; a prompt that already ends in <think> (an
// R1 distill's template). The model: `snug mkmodel --preset qwen3-1.7b` made small (1 layer,
// hidden 64), with Qwen's tokenizer and Qwen3's tokenizer_config.json
// (tests/data/tokenizers/qwen3-native: <think> and </think> are single tokens) and random
// weights, so a grammar makes it write the shape under test: "<think>" [a-z ]... "</think>"
// "\n\n" answer (the replies' log-probabilities give the text and tokens it wrote, for checking
// the split against). Servers, one at a time, each on a free port of 127.0.0.1 (--max-model-len
// 512, --threads 1, --no-access-log), each to exit 0 on SIGTERM:
//   1. the model's template (Qwen3's), reasoning auto: the split (several seeds; streamed: every
//      reasoning delta before any content delta, none carrying both, no tag in any delta, joined
//      equal to the whole answer); a reply without a block (reasoning null); a block cut short by
//      max_tokens (all reasoning, content null); thinking_token_budget 3 and 0 ("\n", "</think>",
//      "\n\n" forced after that many tokens), streamed too; enable_thinking false through
//      chat_template_kwargs (the empty block in the prompt: 4 more prompt tokens); a top-level
//      enable_thinking refused; tools: the call after the block read as tool_calls, streamed
//      with no call text in a content delta;
//   2. --reasoning-format none: the whole text in content, no reasoning fields; the budget still
//      closes the block;
//   3. --chat-template tests/data/chat/deepseek-r1-distill-qwen.jinja (its generation prompt
//      ends in <think>): the reply starts inside the block; the budget counts from its start;
//      Anthropic's Messages: thinking.budget_tokens as the budget, a thinking block then a text
//      block, streamed as thinking_delta then text_delta events; OpenAI's Responses: the output's
//      reasoning and message items the chat's parts, streamed alike;
//   4. --chat-template tests/data/chat/hermes-tools.jinja (no think block): no reasoning fields,
//      and thinking_token_budget refused.
//
// Usage: node tests/server/reasoning.mjs BUILD_DIR (default build), from anywhere. Prints one
// "ok - ..." / "FAIL - ..." line per check and a final "N passed, M failed" (see tests/run); exit
// status 1 if any failed. A watchdog fails the file at 110 s. Only node's built-in modules.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addToolCallDelta, build, check, show, postJson, Server, run } from '../lib/harness.mjs';

const REQUEST_MS = 30_000;
const OPEN = '<think>';
const CLOSE = '</think>';
const THINK_ID = 151667; // Qwen3's <think>: biased so that the model opens the block with the one token
const dir = mkdtempSync(path.join(os.tmpdir(), 'snug-reasoning-'));
const model = path.join(dir, 'qwen3');

// GBNF for "<think>" reasoning "</think>" "\n\n" answer; nl: a newline may come before the closing
// tag (the forced close writes one)
const THOUGHT = 'root ::= "<think>" [a-z ]{1,24} "\\n"? "</think>" "\\n\\n" [a-z]{2,8}';
// (a budget of 0 closes the block before any reasoning: the grammar must allow none)
const BUDGETED = THOUGHT.replace('{1,24}', '{0,24}');
const PLAIN = 'root ::= [a-z]{2,6} " " [a-z]{2,6}';
const INSIDE = 'root ::= [a-z ]{1,24} "\\n"? "</think>" "\\n\\n" [a-z]{2,8}';
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'the weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const CALL = 'root ::= "<think>" [a-z ]{1,12} "</think>" "\\n\\n" "<tool_call>\\n{\\"name\\": \\"get_weather\\", ' +
    '\\"arguments\\": {\\"city\\": \\"" [a-z]{1,6} "\\"}}\\n</tool_call>"';

let base = '';
const post = (body) => postJson(base, '/v1/chat/completions', body, REQUEST_MS);

// the text and tokens a reply's log-probabilities give (what the model generated)
const textOf = (items) => Buffer.from(items.flatMap((t) => t.bytes ?? [])).toString('utf8');

// split(text, inside): the parts by the rules of src/chat/reasoning.h, {reasoning (null: no
// block), content}
function split(text, inside) {
    let at = 0;
    if (!inside) {
        const start = text.length - text.trimStart().length;
        if (!text.startsWith(OPEN, start)) return { reasoning: null, content: text };
        at = start + OPEN.length;
    }
    const end = text.indexOf(CLOSE, at);
    if (end < 0) return { reasoning: text.slice(at).trim(), content: '' };
    return { reasoning: text.slice(at, end).trim(), content: text.slice(end + CLOSE.length).trimStart() };
}

// chat(fields): a chat completion with log-probabilities; {text, tokens, reasoning, reasoningAlias,
// content, calls, finish, promptTokens, deltas (streamed: [{kind: 'reasoning'|'content', text}]),
// both (a delta carried both), hasReasoningField}, or {error}
async function chat(fields) {
    const body = { messages: [{ role: 'user', content: 'Think, then answer.' }], max_tokens: 60, logprobs: true,
        seed: 1, ...fields };
    const r = await post(body);
    if (r.status !== 200) return { error: `HTTP ${r.status}: ${r.raw.slice(0, 600)}`, status: r.status, raw: r.raw };
    try {
        if (!body.stream) {
            const d = JSON.parse(r.raw);
            const c = d.choices[0];
            const m = c.message;
            return { text: textOf(c.logprobs.content), tokens: c.logprobs.content.map((t) => t.token),
                reasoning: m.reasoning_content, reasoningAlias: m.reasoning, content: m.content,
                hasReasoningField: 'reasoning_content' in m, finish: c.finish_reason, promptTokens: d.usage.prompt_tokens,
                calls: (m.tool_calls ?? []).map((t) => ({ id: t.id, ...t.function })) };
        }
        const events = r.raw.split('\n\n').filter((e) => e.trim());
        if (events.at(-1)?.trim() !== 'data: [DONE]') return { error: `no [DONE]: ${show(r.raw.slice(-200))}` };
        const out = { reasoning: null, reasoningAlias: null, content: null, deltas: [], both: false, calls: [], finish: null,
            hasReasoningField: false };
        const items = [];
        for (const e of events.slice(0, -1)) {
            const c = JSON.parse(e.slice(6)).choices[0];
            if (!c) continue;
            items.push(...(c.logprobs?.content ?? []));
            const d = c.delta;
            if ('reasoning_content' in d) out.hasReasoningField = true;
            const hasR = typeof d.reasoning_content === 'string' && d.reasoning_content !== '';
            const hasC = typeof d.content === 'string' && d.content !== '';
            if (hasR && (hasC || d.tool_calls)) out.both = true;
            if (hasR) {
                out.deltas.push({ kind: 'reasoning', text: d.reasoning_content });
                out.reasoning = (out.reasoning ?? '') + d.reasoning_content;
                out.reasoningAlias = (out.reasoningAlias ?? '') + (d.reasoning ?? '');
            }
            if (hasC) {
                out.deltas.push({ kind: 'content', text: d.content });
                out.content = (out.content ?? '') + d.content;
            }
            for (const t of d.tool_calls ?? []) {
                out.deltas.push({ kind: 'calls' });
                addToolCallDelta(out.calls, t);
            }
            out.finish = c.finish_reason ?? out.finish;
        }
        out.text = textOf(items);
        out.tokens = items.map((t) => t.token);
        return out;
    } catch (e) {
        return { error: `${e.message}: ${r.raw.slice(0, 600)}` };
    }
}

// splitFailure(a, inside): null when reply a's reasoning and content are its text's parts
function splitFailure(a, inside, { streamed = false } = {}) {
    if (a.error) return a.error;
    const want = split(a.text, inside);
    const content = want.content === '' && want.reasoning !== null ? null : want.content;
    if (streamed && want.reasoning === '') want.reasoning = null; /* an empty block: no reasoning delta */
    if (a.reasoning !== want.reasoning) return `reasoning ${show(a.reasoning)}, the text's ${show(want.reasoning)} (${show(a.text)})`;
    if (a.reasoningAlias !== a.reasoning) return `reasoning ${show(a.reasoningAlias)} beside reasoning_content ${show(a.reasoning)}`;
    if ((a.content ?? null) !== content) return `content ${show(a.content)}, the text's ${show(content)} (${show(a.text)})`;
    if (!streamed) return null;
    if (a.both) return 'a delta carries reasoning and content together';
    const firstContent = a.deltas.findIndex((d) => d.kind !== 'reasoning');
    if (firstContent >= 0 && a.deltas.slice(firstContent).some((d) => d.kind === 'reasoning'))
        return `a reasoning delta after content: ${show(a.deltas)}`;
    if (a.deltas.some((d) => d.text?.includes(OPEN) || d.text?.includes(CLOSE))) return `a tag in a delta: ${show(a.deltas)}`;
    return null;
}

// ---- server 1: Qwen3's template, reasoning auto ------------------------------------------------

async function splitChecks() {
    for (const seed of [1, 2, 3, 4]) {
        const a = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, seed });
        check(`seed ${seed}: the think block in reasoning_content and reasoning, the answer in content`,
            splitFailure(a, false) ?? (a.reasoning ? null : 'empty reasoning'), `${show(a.reasoning)} | ${show(a.content)}`);
        const s = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, seed, stream: true });
        check(`seed ${seed}, streamed: reasoning deltas, then content deltas; joined, the whole answer's`,
            splitFailure(s, false, { streamed: true }) ??
                (s.reasoning === a.reasoning && s.content === a.content ? null : `${show(s.reasoning)} | ${show(s.content)}`),
            `${s.deltas?.filter((d) => d.kind === 'reasoning').length} reasoning deltas, ` +
            `${s.deltas?.filter((d) => d.kind === 'content').length} content`);
    }
    for (const stream of [false, true]) {
        const how = stream ? ', streamed' : '';
        const p = await chat({ grammar: PLAIN, stream });
        check(`a reply without a think block${how}: all content, reasoning_content null`,
            splitFailure(p, false, { streamed: stream }) ?? (p.reasoning === null && !stream && !p.hasReasoningField
                ? 'no reasoning_content field' : null), show(p.content));
        const cut = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, max_tokens: 4, stream });
        check(`a think block cut short by max_tokens${how}: all reasoning, content null`,
            splitFailure(cut, false, { streamed: stream }) ?? (cut.finish === 'length' && cut.reasoning
                ? null : `finish ${cut.finish}, reasoning ${show(cut.reasoning)}`), show(cut.reasoning));
    }
}

// the tokens after <think>: budget of them, then the forced close "\n", "</think>", "\n\n"
function budgetFailure(a, budget, opened) {
    if (a.error) return a.error;
    const at = opened ? a.tokens.indexOf(OPEN) + 1 : 0;
    if (opened && at === 0) return `no ${OPEN} token: ${show(a.tokens)}`;
    const forced = a.tokens.slice(at + budget, at + budget + 3);
    if (JSON.stringify(forced) !== JSON.stringify(['\n', CLOSE, '\n\n']))
        return `after ${budget} tokens of the block: ${show(forced)}, not the forced close (${show(a.tokens)})`;
    return null;
}

async function budgetChecks() {
    for (const [budget, seed] of [[3, 1], [5, 2], [0, 3]]) {
        for (const stream of [false, true]) {
            const a = await chat({ grammar: BUDGETED, logit_bias: { [THINK_ID]: 100 }, thinking_token_budget: budget, seed,
                stream });
            check(`thinking_token_budget ${budget}${stream ? ', streamed' : ''}: the close forced after ${budget} tokens, ` +
                'the answer after it', budgetFailure(a, budget, true) ?? splitFailure(a, false, { streamed: stream }) ??
                (budget === 0 && a.reasoning !== (stream ? null : '') ? `reasoning ${show(a.reasoning)}` : null),
            `${show(a.tokens?.slice(0, budget + 4))}`);
        }
    }
    const none = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, seed: 1 });
    const big = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, seed: 1, thinking_token_budget: 1000 });
    check('a budget the block does not reach: the same reply as without one',
        none.error ?? big.error ?? (none.text === big.text ? null : `${show(big.text)}, not ${show(none.text)}`));
    const bad = await chat({ thinking_token_budget: -1 });
    check('thinking_token_budget -1: 400 naming it', bad.status === 400 && JSON.parse(bad.raw).error.param ===
        'thinking_token_budget' ? null : `${bad.status} ${show(bad.raw)}`);
}

async function kwargsChecks() {
    const on = await chat({ grammar: PLAIN });
    const off = await chat({ grammar: PLAIN, chat_template_kwargs: { enable_thinking: false } });
    const onExplicit = await chat({ grammar: PLAIN, chat_template_kwargs: { enable_thinking: true } });
    check('chat_template_kwargs {"enable_thinking": false}: the empty think block in the prompt (4 more tokens)',
        on.error ?? off.error ?? (off.promptTokens === on.promptTokens + 4 ? null
            : `${off.promptTokens} prompt tokens, ${on.promptTokens} without`), `${on.promptTokens} -> ${off.promptTokens}`);
    check('chat_template_kwargs {"enable_thinking": true}: the prompt as without it',
        onExplicit.error ?? (onExplicit.promptTokens === on.promptTokens ? null : `${onExplicit.promptTokens} prompt tokens`));
    check('enable_thinking false: a plain reply is content, reasoning_content null',
        splitFailure(off, false) ?? (off.reasoning === null ? null : show(off.reasoning)), show(off.content));
    const top = await chat({ enable_thinking: false });
    let param = null;
    try {
        param = JSON.parse(top.raw).error.param;
    } catch (e) { /* checked below */ }
    check('a top-level enable_thinking: 400 pointing to chat_template_kwargs',
        top.status === 400 && param === 'enable_thinking' && top.raw.includes('chat_template_kwargs') ? null
            : `${top.status} ${show(top.raw)}`);
    const reserved = await chat({ chat_template_kwargs: { messages: [] } });
    check('chat_template_kwargs naming messages: 400', reserved.status === 400 ? null : `${reserved.status}`);
}

async function toolChecks() {
    for (const stream of [false, true]) {
        const a = await chat({ grammar: CALL, logit_bias: { [THINK_ID]: 100 }, tools: TOOLS, stream });
        const whole = split(a.text ?? '', false);
        check(`a tool call after the think block${stream ? ', streamed' : ''}: tool_calls, the reasoning apart, no content`,
            a.error ?? (a.finish !== 'tool_calls' ? `finish ${a.finish}: ${show(a.text)}` : null) ??
                (a.calls.length === 1 && a.calls[0].name === 'get_weather' && JSON.parse(a.calls[0].arguments).city
                    ? null : `calls ${show(a.calls)}`) ??
                (a.reasoning === whole.reasoning ? null : `reasoning ${show(a.reasoning)}, the text's ${show(whole.reasoning)}`) ??
                (a.content == null ? null : `content ${show(a.content)}`) ??
                (stream && a.both ? 'a delta carries reasoning with the calls' : null),
            a.calls?.map((c) => `${c.name}(${c.arguments})`).join(' '));
    }
}

// ---- servers 2 to 4 ------------------------------------------------------------------------------

async function noneChecks() {
    for (const stream of [false, true]) {
        const a = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, stream });
        check(`--reasoning-format none${stream ? ', streamed' : ''}: the whole text in content, no reasoning fields`,
            a.error ?? (a.content === a.text && a.text.startsWith(OPEN) && !a.hasReasoningField ? null
                : `content ${show(a.content)}, text ${show(a.text)}, reasoning field ${a.hasReasoningField}`), show(a.content));
    }
    const b = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 }, thinking_token_budget: 2 });
    check('--reasoning-format none: thinking_token_budget still closes the block',
        budgetFailure(b, 2, true) ?? (b.content === b.text ? null : show(b.content)), show(b.tokens?.slice(0, 6)));
}

async function insideChecks() {
    for (const stream of [false, true]) {
        const a = await chat({ grammar: INSIDE, stream });
        check(`a prompt ending in <think> (R1 distill)${stream ? ', streamed' : ''}: the reply starts inside the block`,
            splitFailure(a, true, { streamed: stream }) ?? (a.reasoning ? null : 'no reasoning'),
            `${show(a.reasoning)} | ${show(a.content)}`);
        const b = await chat({ grammar: INSIDE, thinking_token_budget: 2, stream });
        check(`R1 distill, thinking_token_budget 2${stream ? ', streamed' : ''}: counted from the reply's start`,
            budgetFailure(b, 2, false) ?? splitFailure(b, true, { streamed: stream }), show(b.tokens?.slice(0, 6)));
    }
}

// messages(fields): an Anthropic Messages request (greedy); {thinking, text, types (the blocks'),
// stop, stream: the events' names, each block's deltas joined} or {error}
async function messages(fields) {
    const body = { model: 'qwen3', max_tokens: 12, temperature: 0,
        messages: [{ role: 'user', content: 'Think, then answer.' }], ...fields };
    const r = await postJson(base, '/v1/messages', body, REQUEST_MS);
    if (r.status !== 200) return { error: `HTTP ${r.status}: ${r.raw.slice(0, 600)}` };
    try {
        if (!body.stream) {
            const m = JSON.parse(r.raw);
            return { types: m.content.map((b) => b.type), thinking: m.content.find((b) => b.type === 'thinking')?.thinking,
                text: m.content.find((b) => b.type === 'text')?.text ?? '', stop: m.stop_reason };
        }
        const out = { names: [], types: [], thinking: '', text: '', stop: null };
        for (const e of r.raw.split('\n\n').filter((x) => x.trim())) {
            const [name, data] = e.split('\n');
            const d = JSON.parse(data.slice(6));
            out.names.push(name.slice(7));
            if (d.type === 'content_block_start') out.types.push(d.content_block.type);
            if (d.delta?.type === 'thinking_delta') out.thinking += d.delta.thinking;
            if (d.delta?.type === 'text_delta') out.text += d.delta.text;
            if (d.type === 'message_delta') out.stop = d.delta.stop_reason;
        }
        return out;
    } catch (e) {
        return { error: `${e.message}: ${r.raw.slice(0, 600)}` };
    }
}

// Anthropic's Messages on the same model, greedy: thinking.budget_tokens is the think budget, and
// the reply's blocks are the chat endpoint's parts (a thinking block for its reasoning, a text block
// for its content; this random model's greedy reply is newlines, so both may be empty), streamed as
// not (thinking_delta events in a thinking block, before any text block).
async function anthropicChecks() {
    const want = await chat({ thinking_token_budget: 2, temperature: 0, max_tokens: 12 });
    const types = JSON.stringify([...(want.reasoning !== null ? ['thinking'] : []),
        ...(want.content || want.reasoning === null ? ['text'] : [])]);
    const a = await messages({ thinking: { type: 'enabled', budget_tokens: 2 } });
    check('Anthropic Messages, thinking.budget_tokens 2: a thinking block for the chat\'s reasoning, text for its content',
        a.error ?? want.error ?? (JSON.stringify(a.types) === types && a.thinking === (want.reasoning ?? undefined) &&
            a.text === (want.content ?? '') && a.stop === 'max_tokens' ? null
            : `${show(a)} against ${show({ reasoning: want.reasoning, content: want.content, tokens: want.tokens })}`));
    const s = await messages({ thinking: { type: 'enabled', budget_tokens: 2 }, stream: true });
    const order = s.names?.filter((n) => n !== 'ping').join(' ') ?? '';
    check('Anthropic Messages streamed: the same texts, the events in their order',
        s.error ?? (s.thinking === (a.thinking ?? '') && s.text === a.text && s.types.every((t, k) => t === 'thinking'
            ? k === 0 : true) && /^message_start( content_block_start( content_block_delta)* content_block_stop)+ message_delta message_stop$/
            .test(order) ? null : `${show(s)}`));
}

// OpenAI's Responses on the same model, greedy: the output's items are the chat endpoint's parts
// (a reasoning item when it reasoned, a message of its content), streamed as not.
async function responsesChecks() {
    const want = await chat({ temperature: 0, max_tokens: 12 });
    const expect = JSON.stringify([...(want.reasoning ? ['reasoning'] : []), ...(want.content || !want.reasoning ? ['message'] : [])]);
    const texts = (output) => ({
        reasoning: output.find((i) => i.type === 'reasoning')?.content?.[0]?.text ?? null,
        content: output.find((i) => i.type === 'message')?.content?.[0]?.text ?? null });
    const r = await postJson(base, '/v1/responses', { input: 'Think, then answer.', max_output_tokens: 12, temperature: 0 },
        REQUEST_MS);
    let a = null;
    try { a = JSON.parse(r.raw); } catch (e) { /* checked below */ }
    const got = a?.output ? texts(a.output) : null;
    check('Responses: the output items are the chat\'s reasoning and content',
        want.error ?? (r.status === 200 && JSON.stringify(a.output.map((i) => i.type)) === expect &&
            got.reasoning === (want.reasoning || null) && got.content === (want.content ?? (want.reasoning ? null : ''))
            ? null : `${r.status} ${show(r.raw.slice(0, 600))} against ${show(want)}`));
    const st = await postJson(base, '/v1/responses', { input: 'Think, then answer.', max_output_tokens: 12, temperature: 0,
        stream: true }, REQUEST_MS);
    const events = st.raw.split('\n\n').filter((x) => x.trim()).map((e) => JSON.parse(e.split('\n')[1].slice(6)));
    const last = events.at(-1);
    check('Responses streamed: numbered events ending in the whole response, its output as not streamed',
        st.status === 200 && events.every((e, k) => e.sequence_number === k) &&
            ['response.completed', 'response.incomplete'].includes(last?.type) && a &&
            JSON.stringify(texts(last.response.output)) === JSON.stringify(got) ? null : show(st.raw.slice(-600)));
}

async function noThinkChecks() {
    const a = await chat({ grammar: THOUGHT, logit_bias: { [THINK_ID]: 100 } });
    check('a template without a think block: the text in content, no reasoning fields',
        a.error ?? (a.content === a.text && !a.hasReasoningField ? null : `content ${show(a.content)}`), show(a.content));
    const b = await chat({ thinking_token_budget: 4 });
    let param = null;
    try {
        param = JSON.parse(b.raw).error.param;
    } catch (e) { /* checked below */ }
    check('a template without a think block: thinking_token_budget refused (400 naming it)',
        b.status === 400 && param === 'thinking_token_budget' ? null : `${b.status} ${show(b.raw)}`);
}

let server = null;

async function main() {
    execFileSync(path.join(build, 'snug'), ['mkmodel', '--preset', 'qwen3-1.7b', '--layers', '1', '--hidden', '64',
        '--heads', '2', '--kv-heads', '1', '--intermediate', '64', '--dtype', 'bf16', model], { stdio: 'ignore' });
    const common = [model, '--max-model-len', '512', '--threads', '1', '--no-access-log'];
    const runs = [
        ['Qwen3, reasoning auto', [], [splitChecks, budgetChecks, kwargsChecks, toolChecks]],
        ['Qwen3, --reasoning-format none', ['--reasoning-format', 'none'], [noneChecks]],
        ['an R1 distill template', ['--chat-template', 'tests/data/chat/deepseek-r1-distill-qwen.jinja'],
            [insideChecks, anthropicChecks, responsesChecks]],
        ['a template without a think block', ['--chat-template', 'tests/data/chat/hermes-tools.jinja'], [noThinkChecks]],
    ];
    for (const [label, args, checks] of runs) {
        server = new Server([...common, ...args], `the server (${label})`);
        if (!(await server.start())) continue;
        base = server.base;
        await server.checkThenStop(checks);
    }
}

run(main, { watchdogMs: 110_000, servers: () => [server], cleanup: () => rmSync(dir, { recursive: true, force: true }) });
