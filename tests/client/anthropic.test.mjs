// snug's Anthropic Messages API (POST /v1/messages and /v1/messages/count_tokens) driven by the
// official `@anthropic-ai/sdk` npm package: what a real client sends, parses and raises. Run by
// tests/client/client.sh, which starts the server (with --api-key and a chat template) and sets
//   SNUG_BASE_URL  e.g. http://127.0.0.1:PORT/v1
//   SNUG_API_KEY   the key the server was started with
// The model is the bundled models/stories260K (served as "stories260K", max-model-len 256): it
// writes children's stories, so the tests compare texts with each other (temperature 0 is
// deterministic) and never assert what the words are.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { eventNames, rejection } from './common.mjs';
import { Stream } from '@anthropic-ai/sdk/core/streaming';

const baseURL = process.env.SNUG_BASE_URL ?? 'http://127.0.0.1:8000/v1';
const apiKey = process.env.SNUG_API_KEY ?? 'test-key';
const model = process.env.SNUG_MODEL ?? 'stories260K';
// the SDK appends /v1/messages to its baseURL itself: the server's origin, less client.sh's /v1
const ORIGIN = baseURL.replace(/\/v1\/?$/, '');

// newClient(options): an SDK client of the server. maxRetries 0: an error status must reach the
// test as the SDK raised it, not be retried. (This SDK sends an apiKey as `Authorization:
// Bearer`, not as x-api-key; see the tests of the key.)
function newClient(options = {}) {
    return new Anthropic({ baseURL: ORIGIN, apiKey, maxRetries: 0, timeout: 20_000, ...options });
}
const client = newClient();

// every test's own time limit: a hung request fails its test, not the whole file
const T = { timeout: 15_000 };

const messages = [{ role: 'user', content: 'Tell me a story about a dog.' }];
const STOP_REASONS = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'];

// the tool of the tool tests. maxLength and additionalProperties keep a call short (the model
// knows nothing of JSON: the call is constrained decoding's, and a free string could run to
// max_tokens); the checks below hold the server to them.
const weather = {
    name: 'get_weather',
    description: 'The weather in a city now',
    input_schema: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 12 } },
        required: ['city'],
        additionalProperties: false,
    },
};
const weatherQuestion = [{ role: 'user', content: 'What is the weather in Paris?' }];
// a call takes some 60 tokens here (the JSON's punctuation and whitespace come a token or two at
// a time): room for it, the prompt (about 40) still well within the 256 of the context
const CALL_TOKENS = 120;

// promptTokens(usage): the prompt's token count, computed and read from the prefix cache
function promptTokens(usage) {
    return usage.input_tokens + usage.cache_read_input_tokens;
}

// textOf(message): the text of its text blocks, joined
function textOf(message) {
    return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

// checkMessage(m, maxTokens): m is a Messages reply of Anthropic's shape: a msg_ id, the served
// model, text and tool_use blocks (a text block never empty), a stop_reason that agrees with the
// content and the usage (max_tokens: exactly maxTokens generated), integer usage with no cache
// writes. Returns m.
function checkMessage(m, maxTokens) {
    assert.match(m.id, /^msg_[A-Za-z0-9_-]+$/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, model);
    assert.ok(Array.isArray(m.content), `content ${JSON.stringify(m.content)}`);
    for (const b of m.content) {
        assert.ok(['text', 'tool_use'].includes(b.type), `a block of type ${b.type}`);
        if (b.type === 'text') {
            assert.equal(typeof b.text, 'string');
            assert.ok(b.text.length > 0, 'a text block only when there is text');
        }
    }
    assert.ok(STOP_REASONS.includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
    assert.equal(m.stop_reason === 'tool_use', m.content.some((b) => b.type === 'tool_use'),
        `stop_reason ${m.stop_reason} with blocks ${m.content.map((b) => b.type)}`);
    if (m.stop_reason === 'stop_sequence') assert.equal(typeof m.stop_sequence, 'string');
    else assert.equal(m.stop_sequence, null);
    const u = m.usage;
    for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens']) {
        assert.ok(Number.isInteger(u[k]) && u[k] >= 0, `usage.${k} ${u[k]}`);
    }
    assert.equal(u.cache_creation_input_tokens, 0);
    assert.ok(promptTokens(u) > 0, 'the prompt has tokens');
    if (m.stop_reason === 'max_tokens') assert.equal(u.output_tokens, maxTokens);
    else assert.ok(u.output_tokens <= maxTokens, `${u.output_tokens} tokens, max_tokens ${maxTokens}`);
    return m;
}

// checkWeatherCall(block): a tool_use block calling get_weather as its schema says; returns its input
function checkWeatherCall(block) {
    assert.equal(block.type, 'tool_use');
    assert.match(block.id, /^toolu_[A-Za-z0-9_-]+$/);
    assert.equal(block.name, 'get_weather');
    const input = block.input;
    assert.ok(input !== null && typeof input === 'object' && !Array.isArray(input), `input ${JSON.stringify(input)}`);
    assert.deepEqual(Object.keys(input), ['city'], JSON.stringify(input));
    assert.equal(typeof input.city, 'string');
    assert.ok([...input.city].length <= 12, `city ${JSON.stringify(input.city)} over maxLength 12`);
    return input;
}

// toolCalls(m): m's tool_use blocks, each checked as a get_weather call, at least one, their ids
// distinct
function toolCalls(m) {
    const calls = m.content.filter((b) => b.type === 'tool_use');
    assert.ok(calls.length >= 1, `no tool_use block in ${JSON.stringify(m.content)}`);
    for (const c of calls) checkWeatherCall(c);
    assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'tool_use ids are distinct');
    return calls;
}

// expectAPIError(promise, Class, {status, type, message}): the promise rejects with an instance
// of Class (an Anthropic.APIError subclass) with that status, whose body (err.error in this SDK:
// the parsed JSON) is Anthropic's {type: 'error', error: {type, message}}, error.type as given
// and error.message matching the message RegExp (when given); returns the error.
async function expectAPIError(promise, Class, { status, type, message }) {
    const err = await rejection(promise, Class, Anthropic.APIError);
    assert.equal(err.status, status, err.message);
    const body = err.error;
    assert.equal(typeof body, 'object', `err.error = ${JSON.stringify(body)}`);
    assert.equal(body.type, 'error', JSON.stringify(body));
    assert.equal(typeof body.error, 'object', JSON.stringify(body));
    assert.equal(body.error.type, type, JSON.stringify(body));
    assert.equal(typeof body.error.message, 'string');
    assert.ok(body.error.message.length > 0, 'the error says what is wrong');
    if (message) assert.match(body.error.message, message);
    // what the SDK reads from the body
    assert.equal(err.type, type);
    assert.equal(err.apiMessage, body.error.message);
    assert.match(err.message, new RegExp(`^${status} `));
    return err;
}

// checkEventOrder(events): the events of one streamed reply, [{event, data}] (event: the SSE
// event name), in Anthropic's order: message_start; then per block i = 0, 1, ...:
// content_block_start (index i), its content_block_delta events (index i, deltas of the block's
// type), content_block_stop (index i); then message_delta; then message_stop. ping may come
// anywhere after message_start. Each event's name is its data's type. Returns what the events
// say: {message (message_start's), blocks (each {type, id, name, text, thinking, json}, the
// deltas joined: text, thinking, or partial_json as json), stop_reason, stop_sequence,
// output_tokens, n_deltas}.
function checkEventOrder(events) {
    const seen = (i) => `event ${i} of ${eventNames(events)}`;
    const deltaType = {
        text: ['text_delta'], tool_use: ['input_json_delta'], thinking: ['thinking_delta', 'signature_delta'],
    };
    const out = { blocks: [], n_deltas: 0 };
    let state = 'begin'; // then 'between' (no block open), 'block', 'delta' (message_delta seen), 'end'
    events.forEach(({ event, data }, i) => {
        assert.equal(data.type, event, `${seen(i)}: the data's type is the event's name`);
        if (event === 'ping') {
            assert.notEqual(state, 'begin', `${seen(i)}: ping before message_start`);
            return;
        }
        const block = out.blocks.at(-1);
        if (state === 'begin') {
            assert.equal(event, 'message_start', seen(i));
            const m = data.message;
            assert.match(m.id, /^msg_[A-Za-z0-9_-]+$/);
            assert.equal(m.type, 'message');
            assert.equal(m.role, 'assistant');
            assert.equal(m.model, model);
            assert.deepEqual(m.content, []);
            assert.equal(m.stop_reason, null);
            assert.equal(m.stop_sequence, null);
            assert.ok(Number.isInteger(m.usage.input_tokens), `message_start usage ${JSON.stringify(m.usage)}`);
            out.message = m;
            state = 'between';
        } else if (state === 'between' && event === 'content_block_start') {
            assert.equal(data.index, out.blocks.length, `${seen(i)}: blocks are numbered from 0`);
            const b = data.content_block;
            assert.ok(b.type in deltaType, `${seen(i)}: a block of type ${b.type}`);
            if (b.type === 'text') assert.deepEqual(b, { type: 'text', text: '' });
            if (b.type === 'thinking') assert.equal(b.thinking, '');
            if (b.type === 'tool_use') {
                assert.match(b.id, /^toolu_[A-Za-z0-9_-]+$/);
                assert.equal(typeof b.name, 'string');
                assert.deepEqual(b.input, {});
            }
            out.blocks.push({ type: b.type, id: b.id, name: b.name, text: '', thinking: '', json: '' });
            state = 'block';
        } else if (state === 'block' && event === 'content_block_delta') {
            assert.equal(data.index, out.blocks.length - 1, `${seen(i)}: the open block's index`);
            const d = data.delta;
            assert.ok(deltaType[block.type].includes(d.type), `${seen(i)}: a ${d.type} in a ${block.type} block`);
            if (d.type === 'text_delta') block.text += d.text;
            if (d.type === 'input_json_delta') block.json += d.partial_json;
            if (d.type === 'thinking_delta') block.thinking += d.thinking;
            out.n_deltas++;
        } else if (state === 'block' && event === 'content_block_stop') {
            assert.equal(data.index, out.blocks.length - 1, `${seen(i)}: the open block's index`);
            state = 'between';
        } else if (state === 'between' && event === 'message_delta') {
            const d = data.delta;
            assert.ok(STOP_REASONS.includes(d.stop_reason), `${seen(i)}: stop_reason ${d.stop_reason}`);
            assert.ok(d.stop_sequence === null || typeof d.stop_sequence === 'string');
            assert.ok(Number.isInteger(data.usage.output_tokens), `${seen(i)}: usage ${JSON.stringify(data.usage)}`);
            out.stop_reason = d.stop_reason;
            out.stop_sequence = d.stop_sequence;
            out.output_tokens = data.usage.output_tokens;
            state = 'delta';
        } else if (state === 'delta' && event === 'message_stop') {
            state = 'end';
        } else {
            assert.fail(`${seen(i)}: ${event} where the state is ${state}`);
        }
    });
    assert.equal(state, 'end', `the stream ends with message_stop: ${eventNames(events)}`);
    return out;
}

// rawEvents(params): the server-sent events of messages.create({...params, stream: true}) as
// they came, [{event, data}], pings included (the SDK's own iteration drops pings and the event
// names); the response must be text/event-stream.
async function rawEvents(params) {
    const response = await client.messages.create({ ...params, stream: true }).asResponse();
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = [];
    for await (const sse of Stream.rawEvents(response)) {
        assert.ok(sse.event, `an event with no name: ${sse.raw.join(' | ')}`);
        events.push({ event: sse.event, data: JSON.parse(sse.data) });
    }
    return events;
}

// withoutIds(content): the blocks less their tool_use ids (which differ from reply to reply)
function withoutIds(content) {
    return content.map((b) => (b.type === 'tool_use' ? { type: b.type, name: b.name, input: b.input } : { ...b }));
}

// recordingClient(options): a client whose requests' headers are kept in .sent (one Headers per
// request), to check what went over the wire
function recordingClient(options) {
    const sent = [];
    const c = newClient({
        ...options,
        fetch: (url, init) => {
            sent.push(new Headers(init.headers));
            return fetch(url, init);
        },
    });
    return { client: c, sent };
}

test('messages.create: a text reply, a msg_ id, stop_reason max_tokens, usage', T, async () => {
    const a = checkMessage(await client.messages.create({ model, max_tokens: 8, messages, temperature: 0 }), 8);
    assert.equal(a.content.length, 1);
    assert.equal(a.content[0].type, 'text');
    assert.equal(a.stop_reason, 'max_tokens');
    assert.equal(a.stop_sequence, null);
    assert.equal(a.usage.output_tokens, 8);
    // temperature 0: the same reply again, under an id of its own
    const b = checkMessage(await client.messages.create({ model, max_tokens: 8, messages, temperature: 0 }), 8);
    assert.notEqual(b.id, a.id);
    assert.deepEqual(b.content, a.content);
    assert.equal(promptTokens(b.usage), promptTokens(a.usage));
});

test('messages.create: the same prompt and greedy reply as chat completions', T, async () => {
    // one engine, two dialects: the same conversation through the chat template either way
    const a = await client.messages.create({ model, max_tokens: 12, messages, temperature: 0 });
    const r = await fetch(`${ORIGIN}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model, messages, max_tokens: 12, temperature: 0 }),
    });
    assert.equal(r.status, 200);
    const chat = await r.json();
    assert.equal(textOf(a), chat.choices[0].message.content);
    assert.equal(promptTokens(a.usage), chat.usage.prompt_tokens);
    assert.equal(a.usage.output_tokens, chat.usage.completion_tokens);
});

test('a prefill (the last message the assistant\'s): the reply continues it, as chat\'s continue_final_message', T,
    async () => {
        const prefilled = [...messages, { role: 'assistant', content: 'Once upon a time' }];
        const a = await client.messages.create({ model, max_tokens: 12, messages: prefilled, temperature: 0 });
        const r = await fetch(`${ORIGIN}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
            body: JSON.stringify({ model, messages: prefilled, max_tokens: 12, temperature: 0, continue_final_message: true }),
        });
        assert.equal(r.status, 200);
        const chat = await r.json();
        assert.equal(textOf(a), chat.choices[0].message.content, 'the continuation alone, as chat\'s');
        assert.equal(promptTokens(a.usage), chat.usage.prompt_tokens);
        const plain = await client.messages.create({ model, max_tokens: 12, messages, temperature: 0 });
        assert.ok(promptTokens(a.usage) > promptTokens(plain.usage), 'the prefill is in the prompt');
        const counted = await client.messages.countTokens({ model, messages: prefilled });
        assert.equal(counted.input_tokens, promptTokens(a.usage));
        // as Anthropic's API: a prefill may not end in whitespace
        let err;
        try {
            await client.messages.create({ model, max_tokens: 4, messages: [...messages, { role: 'assistant', content: 'Once ' }] });
        } catch (e) {
            err = e;
        }
        assert.ok(err instanceof Anthropic.BadRequestError, `got ${err?.constructor?.name}`);
        assert.match(err.error.error.message, /whitespace/);
    });

test('system: a string and one text block are the same prompt; either lengthens it', T, async () => {
    const system = 'You tell short stories to children.';
    const plain = await client.messages.create({ model, max_tokens: 10, messages, temperature: 0 });
    const s = checkMessage(await client.messages.create({
        model, max_tokens: 10, messages, system, temperature: 0,
    }), 10);
    const b = checkMessage(await client.messages.create({
        model, max_tokens: 10, messages, system: [{ type: 'text', text: system }], temperature: 0,
    }), 10);
    assert.deepEqual(b.content, s.content);
    assert.equal(promptTokens(b.usage), promptTokens(s.usage));
    assert.ok(promptTokens(s.usage) > promptTokens(plain.usage),
        `${promptTokens(s.usage)} prompt tokens with the system prompt, ${promptTokens(plain.usage)} without`);
});

test('content: a string and one text block are the same prompt and reply', T, async () => {
    const s = await client.messages.create({ model, max_tokens: 10, messages, temperature: 0 });
    const b = checkMessage(await client.messages.create({
        model, max_tokens: 10, temperature: 0,
        messages: [{ role: 'user', content: [{ type: 'text', text: messages[0].content }] }],
    }), 10);
    assert.deepEqual(b.content, s.content);
    assert.equal(promptTokens(b.usage), promptTokens(s.usage));
});

test('a multi-turn conversation: every turn is in the prompt', T, async () => {
    const convo = [
        ...messages,
        { role: 'assistant', content: 'Once upon a time, there was a dog.' },
        { role: 'user', content: [{ type: 'text', text: 'What did the dog do?' }] },
    ];
    const r = checkMessage(await client.messages.create({ model, max_tokens: 8, messages: convo, temperature: 0 }), 8);
    const first = await client.messages.create({ model, max_tokens: 8, messages, temperature: 0 });
    assert.ok(promptTokens(r.usage) > promptTokens(first.usage), 'every turn is in the prompt');
    assert.equal(r.stop_reason, 'max_tokens');
});

// a word of text to stop at: the first run of 4 or more lowercase letters from its sixth
// character on (so that some text comes before the stop)
function aWordIn(text) {
    const m = /[a-z]{4,}/.exec(text.slice(5));
    assert.ok(m, `no word of 4 letters in ${JSON.stringify(text)}`);
    return m[0];
}

test('stop_sequences: stop_reason stop_sequence, the string that matched, the text before it', T, async () => {
    const full = textOf(await client.messages.create({ model, max_tokens: 40, messages, temperature: 0 }));
    const word = aWordIn(full);
    const r = checkMessage(await client.messages.create({
        model, max_tokens: 40, messages, temperature: 0, stop_sequences: ['no such words', word],
    }), 40);
    assert.equal(r.stop_reason, 'stop_sequence');
    assert.equal(r.stop_sequence, word);
    assert.equal(textOf(r), full.slice(0, full.indexOf(word)),
        `stopped at ${JSON.stringify(word)} in ${JSON.stringify(full)}`);
    assert.ok(r.usage.output_tokens < 40);
    // a stop sequence that never comes: the reply runs to max_tokens
    const n = checkMessage(await client.messages.create({
        model, max_tokens: 12, messages, temperature: 0, stop_sequences: ['no such words'],
    }), 12);
    assert.equal(n.stop_reason, 'max_tokens');
    assert.equal(n.stop_sequence, null);
    assert.ok(full.startsWith(textOf(n)), `${JSON.stringify(textOf(n))} begins ${JSON.stringify(full)}`);
});

test('streaming: the server-sent events in Anthropic\'s order, names and all', T, async () => {
    const want = await client.messages.create({ model, max_tokens: 12, messages, temperature: 0 });
    const events = await rawEvents({ model, max_tokens: 12, messages, temperature: 0 });
    const got = checkEventOrder(events);
    assert.equal(got.blocks.length, 1);
    assert.equal(got.blocks[0].type, 'text');
    assert.equal(got.blocks[0].text, textOf(want));
    assert.ok(got.n_deltas > 1, `${got.n_deltas} text deltas: the text comes as it is made`);
    assert.equal(got.stop_reason, 'max_tokens');
    assert.equal(got.stop_sequence, null);
    assert.equal(got.output_tokens, 12);
    assert.equal(promptTokens({ cache_read_input_tokens: 0, ...got.message.usage }), promptTokens(want.usage));
});

test('streaming: the SDK\'s parsed events (create with stream: true) add up to the reply', T, async () => {
    const want = await client.messages.create({ model, max_tokens: 10, messages, temperature: 0 });
    const stream = await client.messages.create({ model, max_tokens: 10, messages, temperature: 0, stream: true });
    const events = [];
    for await (const e of stream) events.push({ event: e.type, data: e });
    const got = checkEventOrder(events);
    assert.deepEqual(got.blocks.map((b) => [b.type, b.text]), [['text', textOf(want)]]);
    assert.equal(got.stop_reason, want.stop_reason);
    assert.equal(got.output_tokens, want.usage.output_tokens);
    assert.notEqual(got.message.id, want.id);
});

test('streaming: messages.stream()\'s finalMessage() is the reply, its text events add up to the text', T, async () => {
    const want = await client.messages.create({ model, max_tokens: 16, messages, temperature: 0 });
    const stream = client.messages.stream({ model, max_tokens: 16, messages, temperature: 0 });
    const pieces = [];
    stream.on('text', (delta) => pieces.push(delta));
    const final = await stream.finalMessage();
    checkMessage(final, 16);
    assert.deepEqual(final.content, want.content);
    assert.equal(final.stop_reason, 'max_tokens');
    assert.equal(final.stop_sequence, null);
    assert.equal(final.usage.output_tokens, 16);
    assert.equal(pieces.join(''), textOf(want));
    assert.ok(pieces.length > 1, `${pieces.length} text events`);
    assert.equal(await stream.finalText(), textOf(want));
});

test('streaming with a stop sequence: message_delta names it, the text stops before it', T, async () => {
    const full = textOf(await client.messages.create({ model, max_tokens: 40, messages, temperature: 0 }));
    const word = aWordIn(full);
    const params = { model, max_tokens: 40, messages, temperature: 0, stop_sequences: [word] };
    const want = await client.messages.create(params);
    const got = checkEventOrder(await rawEvents(params));
    assert.equal(got.stop_reason, 'stop_sequence');
    assert.equal(got.stop_sequence, word);
    assert.equal(got.blocks.map((b) => b.text).join(''), textOf(want));
    assert.equal(textOf(want), full.slice(0, full.indexOf(word)));
    assert.ok(!textOf(want).includes(word));
    assert.equal(got.output_tokens, want.usage.output_tokens);
});

test('usage: the same long prompt again is read from the prefix cache', T, async () => {
    // a prompt no other test sends (its first words are this run's own), of some 100 tokens
    const tag = `Day ${Math.floor(Math.random() * 1e6)}.`;
    const long = [{ role: 'user', content: `${tag} ${'The cat and the dog played in the park. '.repeat(8)}` }];
    const a = checkMessage(await client.messages.create({ model, max_tokens: 4, messages: long, temperature: 0 }), 4);
    const b = checkMessage(await client.messages.create({ model, max_tokens: 4, messages: long, temperature: 0 }), 4);
    assert.ok(promptTokens(a.usage) > 64, `${promptTokens(a.usage)} prompt tokens`);
    assert.equal(a.usage.cache_read_input_tokens, 0, 'a prompt never seen: nothing from the cache');
    assert.equal(promptTokens(b.usage), promptTokens(a.usage));
    assert.ok(b.usage.cache_read_input_tokens > 0, `the second time: ${JSON.stringify(b.usage)}`);
    assert.deepEqual(b.content, a.content);
});

test('count_tokens: the prompt\'s count, as messages.create has it, with and without system', T, async () => {
    const system = 'You tell short stories to children.';
    for (const extra of [{}, { system }, { system: [{ type: 'text', text: system }] }]) {
        const n = await client.messages.countTokens({ model, messages, ...extra });
        assert.deepEqual(Object.keys(n), ['input_tokens'], JSON.stringify(n));
        assert.ok(Number.isInteger(n.input_tokens) && n.input_tokens > 0, JSON.stringify(n));
        const r = await client.messages.create({ model, max_tokens: 1, messages, temperature: 0, ...extra });
        assert.equal(n.input_tokens, promptTokens(r.usage), `with ${JSON.stringify(extra)}`);
    }
    const without = await client.messages.countTokens({ model, messages });
    const withSystem = await client.messages.countTokens({ model, messages, system });
    assert.ok(withSystem.input_tokens > without.input_tokens);
});

test('count_tokens with tools: the count messages.create gives with the same tools', T, async () => {
    const n = await client.messages.countTokens({ model, messages: weatherQuestion, tools: [weather] });
    const r = await client.messages.create({
        model, max_tokens: 1, messages: weatherQuestion, tools: [weather], tool_choice: { type: 'auto' },
        temperature: 0,
    });
    assert.equal(n.input_tokens, promptTokens(r.usage));
});

test('tool_choice tool: a get_weather call with a toolu_ id, stop_reason tool_use', T, async () => {
    const r = checkMessage(await client.messages.create({
        model, max_tokens: CALL_TOKENS, messages: weatherQuestion, tools: [weather],
        tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0,
    }), CALL_TOKENS);
    assert.equal(r.stop_reason, 'tool_use');
    assert.equal(r.stop_sequence, null);
    toolCalls(r);
});

test('tool_choice any (one call): a get_weather call, stop_reason tool_use', T, async () => {
    // disable_parallel_tool_use: a single call, as Anthropic documents it (the tiny model would
    // otherwise go on calling until max_tokens)
    const r = checkMessage(await client.messages.create({
        model, max_tokens: CALL_TOKENS, messages: weatherQuestion, tools: [weather],
        tool_choice: { type: 'any', disable_parallel_tool_use: true }, temperature: 0,
    }), CALL_TOKENS);
    assert.equal(r.stop_reason, 'tool_use');
    assert.equal(toolCalls(r).length, 1);
});

test('a tool call streamed: the input_json_delta pieces make finalMessage()\'s input', T, async () => {
    const params = {
        model, max_tokens: CALL_TOKENS, messages: weatherQuestion, tools: [weather],
        tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0,
    };
    const want = await client.messages.create(params);
    const stream = client.messages.stream(params);
    // each event as it arrives (the helper goes on to build its message in message_start's)
    const events = [];
    stream.on('streamEvent', (e) => events.push({ event: e.type, data: structuredClone(e) }));
    const final = await stream.finalMessage();
    const got = checkEventOrder(events);
    checkMessage(final, CALL_TOKENS);
    assert.equal(final.stop_reason, 'tool_use');
    assert.equal(got.stop_reason, 'tool_use');
    const calls = toolCalls(final);
    const streamed = got.blocks.filter((b) => b.type === 'tool_use');
    assert.equal(streamed.length, calls.length);
    streamed.forEach((b, i) => {
        assert.equal(b.id, calls[i].id);
        assert.equal(b.name, calls[i].name);
        assert.deepEqual(JSON.parse(b.json), calls[i].input, `partial_json pieces ${JSON.stringify(b.json)}`);
    });
    // temperature 0: the call the non-streamed request made, under other ids
    assert.deepEqual(withoutIds(final.content), withoutIds(want.content));
});

test('a tool-use loop: the call, its result sent back, then a text reply', T, async () => {
    const first = await client.messages.create({
        model, max_tokens: CALL_TOKENS, messages: weatherQuestion, tools: [weather],
        tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0,
    });
    const [call] = toolCalls(first);
    const results = [
        // tool_choice none, the result as a string
        [{ type: 'none' }, { type: 'tool_result', tool_use_id: call.id, content: 'sunny, 21 C' }],
        // tool_choice auto, the result as text blocks, an error
        [{ type: 'auto' }, {
            type: 'tool_result', tool_use_id: call.id, is_error: true,
            content: [{ type: 'text', text: 'no weather for ' }, { type: 'text', text: call.input.city }],
        }],
    ];
    for (const [toolChoice, result] of results) {
        const r = checkMessage(await client.messages.create({
            model, max_tokens: 8, tools: [weather], tool_choice: toolChoice, temperature: 0,
            messages: [
                ...weatherQuestion,
                { role: 'assistant', content: first.content },
                { role: 'user', content: [result] },
            ],
        }), 8);
        assert.ok(r.content.some((b) => b.type === 'text'), `${toolChoice.type}: ${JSON.stringify(r.content)}`);
        assert.ok(!r.content.some((b) => b.type === 'tool_use'), `${toolChoice.type}: ${JSON.stringify(r.content)}`);
        assert.ok(['end_turn', 'max_tokens'].includes(r.stop_reason), r.stop_reason);
        assert.ok(promptTokens(r.usage) > promptTokens(first.usage), 'the call and its result are in the prompt');
    }
});

test('tool_choice none with tools: no tool_use, the reply as without tools', T, async () => {
    const r = checkMessage(await client.messages.create({
        model, max_tokens: 12, messages: weatherQuestion, tools: [weather], tool_choice: { type: 'none' },
        temperature: 0,
    }), 12);
    assert.ok(!r.content.some((b) => b.type === 'tool_use'), JSON.stringify(r.content));
    assert.equal(r.stop_reason, 'max_tokens');
    // the template (TinyLlama's) shows no tools: the same prompt, the same greedy reply
    const plain = await client.messages.create({ model, max_tokens: 12, messages: weatherQuestion, temperature: 0 });
    assert.equal(promptTokens(r.usage), promptTokens(plain.usage));
    assert.equal(textOf(r), textOf(plain));
});

test('thinking blocks sent back, and thinking disabled, are accepted', T, async () => {
    const r = checkMessage(await client.messages.create({
        model, max_tokens: 8, temperature: 0, thinking: { type: 'disabled' },
        messages: [
            ...messages,
            {
                role: 'assistant',
                content: [
                    { type: 'thinking', thinking: 'A story about a dog, then.', signature: 'c2lnbmF0dXJl' },
                    { type: 'text', text: 'Once upon a time, there was a dog.' },
                ],
            },
            { role: 'user', content: 'And then?' },
        ],
    }), 8);
    assert.ok(textOf(r).length > 0);
    assert.ok(!r.content.some((b) => b.type === 'thinking'), 'no thinking from a model that does not think');
});

test('metadata, temperature, top_p, top_k are accepted; top_k 1 is the greedy reply', T, async () => {
    const greedy = await client.messages.create({ model, max_tokens: 10, messages, temperature: 0 });
    const withMetadata = await client.messages.create({
        model, max_tokens: 10, messages, temperature: 0, metadata: { user_id: 'x' },
    });
    assert.deepEqual(withMetadata.content, greedy.content);
    const sampled = checkMessage(await client.messages.create({
        model, max_tokens: 10, messages, temperature: 0.8, top_p: 0.9, top_k: 20,
    }), 10);
    assert.equal(sampled.stop_reason, 'max_tokens');
    const topK1 = await client.messages.create({ model, max_tokens: 10, messages, temperature: 1, top_k: 1 });
    assert.deepEqual(topK1.content, greedy.content);
});

test('concurrent requests: 4 streamed and 4 not at once, each the greedy reply', T, async () => {
    const want = textOf(await client.messages.create({ model, max_tokens: 16, messages, temperature: 0 }));
    const plain = Array.from({ length: 4 }, async () =>
        textOf(await client.messages.create({ model, max_tokens: 16, messages, temperature: 0 })));
    const streamed = Array.from({ length: 4 }, () =>
        client.messages.stream({ model, max_tokens: 16, messages, temperature: 0 }).finalText());
    assert.deepEqual(await Promise.all([...plain, ...streamed]), Array(8).fill(want));
});

test('no max_tokens: BadRequestError, 400, invalid_request_error naming max_tokens', T, async () => {
    await expectAPIError(client.messages.create({ model, messages }), Anthropic.BadRequestError,
        { status: 400, type: 'invalid_request_error', message: /max_tokens/ });
});

test('an unknown field or a wrong type: BadRequestError naming the field, streamed or not', T, async () => {
    const bad = { status: 400, type: 'invalid_request_error' };
    await expectAPIError(client.messages.create({ model, max_tokens: 4, messages, frobnicate: true }),
        Anthropic.BadRequestError, { ...bad, message: /frobnicate/ });
    await expectAPIError(client.messages.create({ model, max_tokens: '4', messages }),
        Anthropic.BadRequestError, { ...bad, message: /max_tokens/ });
    await expectAPIError(client.messages.create({ model, max_tokens: 4, messages, temperature: 'warm' }),
        Anthropic.BadRequestError, { ...bad, message: /temperature/ });
    // a stream refused before its first event: create() rejects, there is nothing to iterate
    await expectAPIError(client.messages.create({ model, max_tokens: 4, messages, frobnicate: 1, stream: true }),
        Anthropic.BadRequestError, { ...bad, message: /frobnicate/ });
});

test('no messages: BadRequestError, 400', T, async () => {
    await expectAPIError(client.messages.create({ model, max_tokens: 4, messages: [] }), Anthropic.BadRequestError,
        { status: 400, type: 'invalid_request_error', message: /messages/ });
});

test('a prompt over the model length: BadRequestError, 400', T, async () => {
    const bad = { status: 400, type: 'invalid_request_error' };
    const long = [{ role: 'user', content: 'Once upon a time '.repeat(100) }]; // 400 tokens, over 256
    await expectAPIError(client.messages.create({ model, max_tokens: 4, messages: long }),
        Anthropic.BadRequestError, bad);
    // fits alone, but not with max_tokens
    const mid = [{ role: 'user', content: 'Once upon a time '.repeat(40) }];
    await expectAPIError(client.messages.create({ model, max_tokens: 100, messages: mid }),
        Anthropic.BadRequestError, bad);
});

test('an unknown model: NotFoundError, 404, not_found_error', T, async () => {
    await expectAPIError(client.messages.create({ model: 'claude-9', max_tokens: 4, messages }),
        Anthropic.NotFoundError, { status: 404, type: 'not_found_error', message: /claude-9/ });
    await expectAPIError(client.messages.create({ model: 'claude-9', max_tokens: 4, messages, stream: true }),
        Anthropic.NotFoundError, { status: 404, type: 'not_found_error' });
});

test('the key as x-api-key or as an Authorization bearer (authToken): both accepted', T, async () => {
    // x-api-key alone: the SDK's Authorization header taken off
    const xKey = recordingClient({ defaultHeaders: { Authorization: null, 'x-api-key': apiKey } });
    const bearer = recordingClient({ apiKey: null, authToken: apiKey });
    for (const { client: c, sent } of [xKey, bearer]) {
        const want = await client.messages.countTokens({ model, messages });
        checkMessage(await c.messages.create({ model, max_tokens: 2, messages }), 2);
        assert.deepEqual(await c.messages.countTokens({ model, messages }), want);
        assert.equal(sent.length, 2);
        for (const h of sent) assert.ok(h.get('anthropic-version'), 'the SDK sends anthropic-version');
    }
    for (const h of xKey.sent) {
        assert.equal(h.get('x-api-key'), apiKey);
        assert.equal(h.get('authorization'), null);
    }
    for (const h of bearer.sent) {
        assert.equal(h.get('authorization'), `Bearer ${apiKey}`);
        assert.equal(h.get('x-api-key'), null);
    }
});

test('a wrong key: AuthenticationError, 401, authentication_error, each way it is sent', T, async () => {
    const wrong = apiKey + '-wrong';
    const clients = [
        newClient({ defaultHeaders: { Authorization: null, 'x-api-key': wrong } }),
        newClient({ apiKey: null, authToken: wrong }),
        newClient({ apiKey: wrong }),
    ];
    const unauthorized = { status: 401, type: 'authentication_error' };
    for (const c of clients) {
        await expectAPIError(c.messages.create({ model, max_tokens: 2, messages }),
            Anthropic.AuthenticationError, unauthorized);
        await expectAPIError(c.messages.create({ model, max_tokens: 2, messages, stream: true }),
            Anthropic.AuthenticationError, unauthorized);
        await expectAPIError(c.messages.countTokens({ model, messages }), Anthropic.AuthenticationError, unauthorized);
    }
    // no key at all
    const none = newClient({ defaultHeaders: { Authorization: null } });
    await expectAPIError(none.messages.create({ model, max_tokens: 2, messages }),
        Anthropic.AuthenticationError, unauthorized);
});
