// snug's OpenAI-compatible API driven by the official `openai` npm package: what a real
// client sends, parses and raises. Run by tests/client/client.sh, which starts the server
// (with --api-key and a chat template) and sets
//   SNUG_BASE_URL  e.g. http://127.0.0.1:PORT/v1
//   SNUG_API_KEY   the key the server was started with
// The model is the bundled models/stories260K (served as "stories260K", max-model-len 256).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { expectOpenAIError, serverMetrics } from './common.mjs';

const baseURL = process.env.SNUG_BASE_URL ?? 'http://127.0.0.1:8000/v1';
const apiKey = process.env.SNUG_API_KEY ?? 'test-key';
const model = process.env.SNUG_MODEL ?? 'stories260K';
// {base}/../metrics: the Prometheus page beside /v1
const metricsURL = new URL('../metrics', baseURL.endsWith('/') ? baseURL : baseURL + '/').href;

// maxRetries 0: an error status must reach the test as the SDK raised it, not be retried
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });

// every test's own time limit: a hung request fails its test, not the whole file
const T = { timeout: 15_000 };

const prompt = 'Once upon a time';
const messages = [{ role: 'user', content: 'Tell me a story about a dog.' }];

const { metrics, gauge, waitForGauges } = serverMetrics(metricsURL, apiKey);
const expectAPIError = (promise, Class, fields) => expectOpenAIError(OpenAI, promise, Class, fields);

function checkUsage(usage, completionTokens) {
    assert.ok(usage, 'usage is present');
    assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0, `prompt_tokens ${usage.prompt_tokens}`);
    if (completionTokens !== undefined) assert.equal(usage.completion_tokens, completionTokens);
    assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 0);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

test('completion: text, finish_reason length, usage', T, async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.id, 'string');
    assert.ok(r.id.length > 0);
    assert.equal(r.model, model);
    assert.ok(Number.isInteger(r.created));
    assert.equal(r.choices.length, 1);
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(typeof c.text, 'string');
    assert.ok(c.text.length > 0);
    assert.equal(c.finish_reason, 'length');
    checkUsage(r.usage, 8);
    // "Once upon a time" is BOS + 4 tokens in the bundled tokenizer
    assert.equal(r.usage.prompt_tokens, 5);
});

test('completion: greedy text is the reference text', T, async () => {
    // tests/data/stories260K/greedy.txt: llama2.c's greedy continuation
    const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0 });
    assert.equal(r.choices[0].text, ', there was a little girl');
});

test('completion: a stop string ends it with finish_reason stop', T, async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 40, temperature: 0, stop: ['Lily'] });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(!r.choices[0].text.includes('Lily'), r.choices[0].text);
    assert.ok(r.choices[0].text.startsWith(', there was a little girl named'), r.choices[0].text);
    checkUsage(r.usage);
});

test('completion: echo is honoured or refused, not ignored', T, async () => {
    let r;
    try {
        r = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, echo: true });
    } catch (e) {
        assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
        assert.equal(e.param, 'echo');
        return;
    }
    assert.ok(r.choices[0].text.startsWith(prompt), `echo: true, text ${JSON.stringify(r.choices[0].text)}`);
});

test('chat completion: an assistant message', T, async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, model);
    assert.equal(r.choices.length, 1);
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(c.message.content.length > 0);
    assert.equal(c.finish_reason, 'length');
    checkUsage(r.usage, 8);
});

test('chat completion: max_completion_tokens', T, async () => {
    const r = await client.chat.completions.create({ model, messages, max_completion_tokens: 3, temperature: 0 });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 3);
});

test('streaming completion: chunks add up to the greedy text', T, async () => {
    const want = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
    const stream = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, stream: true });
    let text = '';
    let chunks = 0;
    let finish = null;
    let id;
    for await (const chunk of stream) {
        chunks++;
        assert.equal(chunk.object, 'text_completion');
        assert.equal(chunk.model, model);
        id ??= chunk.id;
        assert.equal(chunk.id, id, 'every chunk has the same id');
        assert.equal(chunk.usage ?? undefined, undefined, 'no usage without stream_options.include_usage');
        for (const c of chunk.choices) {
            assert.equal(c.index, 0);
            text += c.text;
            if (c.finish_reason) finish = c.finish_reason;
        }
    }
    assert.ok(chunks > 1, `${chunks} chunks`);
    assert.equal(text, want.choices[0].text);
    assert.equal(finish, 'length');
});

test('streaming completion: include_usage puts usage on the final chunk', T, async () => {
    const stream = await client.completions.create({
        model, prompt, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    checkUsage(last.usage, 6);
    assert.equal(last.usage.prompt_tokens, 5);
    for (const c of chunks.slice(0, -1)) assert.ok(c.usage == null, 'only the final chunk has usage');
});

test('streaming chat: role first, content adds up to the greedy reply, usage last', T, async () => {
    const want = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0 });
    const stream = await client.chat.completions.create({
        model, messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length > 2, `${chunks.length} chunks`);
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    let content = '';
    let finish = null;
    for (const c of chunks) {
        for (const ch of c.choices) {
            assert.equal(ch.index, 0);
            content += ch.delta.content ?? '';
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    assert.equal(content, want.choices[0].message.content);
    assert.equal(finish, 'length');
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    checkUsage(last.usage, 10);
    assert.equal(last.usage.prompt_tokens, want.usage.prompt_tokens);
});

test('streaming chat: the SDK stream helper assembles the message', T, async () => {
    const want = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0 });
    const runner = client.chat.completions.stream({ model, messages, max_tokens: 6, temperature: 0 });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.role, 'assistant');
    assert.equal(final.choices[0].message.content, want.choices[0].message.content);
    assert.equal(final.choices[0].finish_reason, 'length');
});

// A stream the client leaves after 3 chunks, in each of the SDK's ways: break out of the
// loop (the SDK aborts the request), stream.controller.abort(), or an AbortSignal passed in the
// request options. The server must notice, free the sequence and go on answering. (After an
// abort the SDK may still yield chunks it had already read, then ends the loop quietly.)
async function abandonAfter3(how, n_choices = 1) {
    const before = gauge(await metrics(), 'snug_generation_tokens_total');
    const ac = new AbortController();
    const maxTokens = 240;
    const stream = await client.completions.create(
        { model, prompt, max_tokens: maxTokens, temperature: 0, stream: true, n: n_choices },
        how === 'signal' ? { signal: ac.signal } : {},
    );
    let n = 0;
    let err;
    try {
        for await (const chunk of stream) {
            assert.ok(chunk.choices.length <= 1); // one choice per chunk, even with n > 1
            if (++n === 3) {
                if (how === 'break') break;
                if (how === 'controller') stream.controller.abort();
                else ac.abort();
            }
        }
    } catch (e) {
        err = e;
    }
    assert.ok(err === undefined || err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError',
        `${err?.constructor?.name}: ${err?.message}`);
    assert.ok(n >= 3, `${n} chunks`);
    if (how === 'break') assert.equal(n, 3);

    // the server still answers
    const r = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0 });
    assert.equal(r.choices[0].text, ', there was a');
    const text = await waitForGauges({ snug_num_requests_running: 0 });
    return { before, after: gauge(text, 'snug_generation_tokens_total'), maxTokens: maxTokens * n_choices };
}

test('streaming: a client that breaks out after 3 chunks; the server goes on', T, async () => {
    await abandonAfter3('break');
});

test('streaming: stream.controller.abort() after 3 chunks; the server goes on', T, async () => {
    await abandonAfter3('controller');
});

test('streaming: an AbortSignal fired after 3 chunks; the server goes on', T, async () => {
    await abandonAfter3('signal');
});

test('streaming: an abandoned stream frees its KV blocks and stops generating', T, async () => {
    // 8 choices of 240 tokens: more than the bundled model generates before a gone client is
    // noticed (a single 240-token stream can be done within a few milliseconds)
    const { before, after, maxTokens } = await abandonAfter3('break', 8);
    await waitForGauges({ snug_num_requests_running: 0, snug_num_requests_waiting: 0, snug_kv_blocks_used: 0 });
    // the abandoned request plus the 4-token one after it: less than the whole 8 x 240
    assert.ok(after - before < maxTokens, `generated ${after - before} tokens, the abandoned request asked for ${maxTokens}`);
});

test('a non-streaming request the client aborts: the server stops generating it', T, async () => {
    const before = gauge(await metrics(), 'snug_generation_tokens_total');
    const req = { model, prompt, max_tokens: 240, temperature: 0, n: 8 }; // 1920 tokens
    const ac = new AbortController();
    const p = client.completions.create(req, { signal: ac.signal });
    p.catch(() => {});
    // abort once the server runs it
    const deadline = Date.now() + 5000;
    while (gauge(await metrics(), 'snug_num_requests_running') === 0 && Date.now() < deadline) {}
    ac.abort();
    await assert.rejects(p, OpenAI.APIUserAbortError);
    const text = await waitForGauges({ snug_num_requests_running: 0, snug_kv_blocks_used: 0 });
    const generated = gauge(text, 'snug_generation_tokens_total') - before;
    assert.ok(generated < 8 * 240, `the server generated all ${generated} tokens for a client that had gone`);
});

test('n = 3: three choices, indexes 0, 1, 2', T, async () => {
    const r = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 1, n: 3 });
    assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
    for (const c of r.choices) {
        assert.equal(typeof c.text, 'string');
        assert.equal(c.finish_reason, 'length');
    }
    checkUsage(r.usage, 18);
});

test('chat n = 3: three assistant messages, indexes 0, 1, 2', T, async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 1, n: 3 });
    assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
    for (const c of r.choices) assert.equal(c.message.role, 'assistant');
});

test('streaming n = 2: chunks of both choices, each adds up', T, async () => {
    const want = await client.completions.create({ model, prompt, max_tokens: 5, temperature: 0 });
    const stream = await client.completions.create({ model, prompt, max_tokens: 5, temperature: 0, n: 2, stream: true });
    const texts = ['', ''];
    for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
    assert.deepEqual(texts, [want.choices[0].text, want.choices[0].text]);
});

test('a batch of prompts: one choice each, in order', T, async () => {
    const r = await client.completions.create({ model, prompt: [prompt, prompt], max_tokens: 4, temperature: 0 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    assert.deepEqual(r.choices.map((c) => c.text), [', there was a', ', there was a']);
});

test('seed: the same seed at temperature 1 gives the same text', T, async () => {
    const req = { model, prompt, max_tokens: 24, temperature: 1, seed: 1234 };
    const a = await client.completions.create(req);
    const b = await client.completions.create(req);
    assert.equal(a.choices[0].text, b.choices[0].text);
    const ca = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 1, seed: 99 });
    const cb = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 1, seed: 99 });
    assert.equal(ca.choices[0].message.content, cb.choices[0].message.content);
});

test('streaming with a stop string: the stop string never reaches the client', T, async () => {
    const want = await client.completions.create({ model, prompt, max_tokens: 40, temperature: 0, stop: ['Lily'] });
    const stream = await client.completions.create({ model, prompt, max_tokens: 40, temperature: 0, stop: ['Lily'], stream: true });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
        for (const c of chunk.choices) {
            text += c.text;
            if (c.finish_reason) finish = c.finish_reason;
        }
    }
    assert.equal(text, want.choices[0].text);
    assert.equal(finish, 'stop');
});

test('chat: a system message and content given as text parts', T, async () => {
    const r = await client.chat.completions.create({
        model,
        messages: [
            { role: 'system', content: 'You tell stories.' },
            { role: 'user', content: [{ type: 'text', text: 'Tell me a story ' }, { type: 'text', text: 'about a dog.' }] },
        ],
        max_tokens: 4,
        temperature: 0,
    });
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    checkUsage(r.usage, 4);
});

test('concurrent requests: 8 at once, each the greedy text', T, async () => {
    const want = (await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 })).choices[0].text;
    const plain = Array.from({ length: 4 }, () => client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 }));
    const streamed = Array.from({ length: 4 }, async () => {
        const stream = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stream: true });
        let text = '';
        for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
        return text;
    });
    const texts = [...(await Promise.all(plain)).map((r) => r.choices[0].text), ...(await Promise.all(streamed))];
    assert.deepEqual(texts, Array(8).fill(want));
});

test('models.list(): the served model', T, async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    assert.ok(ids.includes('stories260K'), JSON.stringify(ids));
    const m = page.data.find((m) => m.id === 'stories260K');
    assert.equal(m.object, 'model');
    assert.equal(typeof m.owned_by, 'string');
    const all = [];
    for await (const x of client.models.list()) all.push(x.id);
    assert.deepEqual(all, ids);
});

test('a bad temperature: BadRequestError, 400, param temperature', T, async () => {
    const err = await expectAPIError(
        client.completions.create({ model, prompt, max_tokens: 4, temperature: -1 }),
        OpenAI.BadRequestError,
        { status: 400, param: 'temperature', type: 'invalid_request_error' },
    );
    assert.match(err.message, /^400 /);
});

test('a bad parameter on a stream: BadRequestError before any chunk', T, async () => {
    await expectAPIError(
        client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 5, stream: true }),
        OpenAI.BadRequestError,
        { status: 400, param: 'temperature' },
    );
});

test('logprobs: tokens and alternatives for completions and chat', T, async () => {
    const c = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, logprobs: 2 });
    const l = c.choices[0].logprobs;
    assert.equal(l.tokens.length, 4);
    assert.equal(l.tokens.join(''), c.choices[0].text);
    assert.equal(l.token_logprobs.length, 4);
    for (const lp of l.token_logprobs) assert.ok(lp <= 0);
    assert.equal(l.top_logprobs.length, 4);
    const r = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0,
                                                     logprobs: true, top_logprobs: 3 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 4);
    assert.equal(content.map((t) => t.token).join(''), r.choices[0].message.content);
    for (const t of content) {
        assert.equal(t.top_logprobs.length, 3);
        assert.equal(t.top_logprobs[0].logprob, t.logprob);
    }
    await expectAPIError(
        client.completions.create({ model, prompt, max_tokens: 4, logprobs: 21 }),
        OpenAI.BadRequestError,
        { status: 400, param: 'logprobs' },
    );
});

test('a body over the server\'s limit: APIError 413, code body_too_large', T, async () => {
    const err = await expectAPIError(
        client.completions.create({ model, prompt: 'a'.repeat(2 << 20), max_tokens: 1 }),
        OpenAI.APIError,
        { status: 413, code: 'body_too_large' },
    );
    assert.ok(!(err instanceof OpenAI.APIConnectionError));
});

test('an unknown model: NotFoundError, code model_not_found', T, async () => {
    await expectAPIError(
        client.completions.create({ model: 'gpt-9', prompt, max_tokens: 4 }),
        OpenAI.NotFoundError,
        { status: 404, code: 'model_not_found' },
    );
    await expectAPIError(
        client.chat.completions.create({ model: 'gpt-9', messages, max_tokens: 4 }),
        OpenAI.NotFoundError,
        { status: 404, code: 'model_not_found' },
    );
});

test('a wrong API key: AuthenticationError; the right key works', T, async () => {
    const wrong = new OpenAI({ baseURL, apiKey: apiKey + '-wrong', maxRetries: 0, timeout: 20_000 });
    await expectAPIError(
        wrong.completions.create({ model, prompt, max_tokens: 4 }),
        OpenAI.AuthenticationError,
        { status: 401 },
    );
    await expectAPIError(wrong.models.list(), OpenAI.AuthenticationError, { status: 401 });
    await expectAPIError(
        wrong.chat.completions.create({ model, messages, max_tokens: 4, stream: true }),
        OpenAI.AuthenticationError,
        { status: 401 },
    );
    const right = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
    const r = await right.completions.create({ model, prompt, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
});

test('a prompt over the model length: BadRequestError, context_length_exceeded', T, async () => {
    const long = 'Once upon a time '.repeat(100); // 400 tokens, over 256
    await expectAPIError(
        client.completions.create({ model, prompt: long, max_tokens: 4 }),
        OpenAI.BadRequestError,
        { status: 400, code: 'context_length_exceeded' },
    );
    // fits alone, but not with max_tokens
    await expectAPIError(
        client.completions.create({ model, prompt: 'Once upon a time '.repeat(40), max_tokens: 100 }),
        OpenAI.BadRequestError,
        { status: 400, code: 'context_length_exceeded' },
    );
});

test('a chat over the model length: BadRequestError, context_length_exceeded', T, async () => {
    const long = [{ role: 'user', content: 'Once upon a time '.repeat(100) }];
    await expectAPIError(
        client.chat.completions.create({ model, messages: long }),
        OpenAI.BadRequestError,
        { status: 400, code: 'context_length_exceeded' },
    );
    await expectAPIError(
        client.chat.completions.create({ model, messages: long, max_tokens: 4, stream: true }),
        OpenAI.BadRequestError,
        { status: 400, code: 'context_length_exceeded' },
    );
});

test('a chat over the model length without max_tokens: the message counts no negative tokens', T, async () => {
    const long = [{ role: 'user', content: 'Once upon a time '.repeat(100) }];
    const err = await expectAPIError(
        client.chat.completions.create({ model, messages: long }),
        OpenAI.BadRequestError,
        { status: 400 },
    );
    assert.doesNotMatch(err.error.message, /-\d/);
});

// Structured output and tools, as the SDK's helpers use them. The model knows nothing of
// JSON: what comes back parses and validates because decoding is constrained.
const person = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, pet: { enum: ['cat', 'dog'] } },
    required: ['name', 'age', 'pet'],
    additionalProperties: false,
};

test('chat.completions.parse with a JSON-schema response format: message.parsed validates', T, async () => {
    for (const seed of [1, 2, 3]) {
        const r = await client.chat.completions.parse({
            model, messages, max_tokens: 150, temperature: 1, seed,
            response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
        });
        const m = r.choices[0].message;
        assert.equal(r.choices[0].finish_reason, 'stop', m.content);
        assert.deepEqual(Object.keys(m.parsed), ['name', 'age', 'pet'], m.content);
        assert.equal(typeof m.parsed.name, 'string');
        assert.ok([...m.parsed.name].length <= 10, m.parsed.name);
        assert.ok(Number.isInteger(m.parsed.age), m.content);
        assert.ok(['cat', 'dog'].includes(m.parsed.pet), m.content);
    }
});

const weather = {
    type: 'function',
    function: {
        name: 'get_weather',
        description: 'The weather in a city now',
        parameters: {
            type: 'object',
            properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
            required: ['city', 'unit'],
            additionalProperties: false,
        },
        strict: true,
    },
};

function checkWeatherCall(call) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args), ['city', 'unit'], call.function.arguments);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 12);
    assert.ok(['c', 'f'].includes(args.unit));
    return args;
}

test('a tool-calling loop: a required call, its result sent back, then the reply', T, async () => {
    const convo = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.chat.completions.create({
        model, messages: convo, tools: [weather], tool_choice: 'required', parallel_tool_calls: false,
        max_tokens: 120, temperature: 1, seed: 7,
    });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const args = checkWeatherCall(choice.message.tool_calls[0]);
    convo.push(choice.message, {
        role: 'tool', tool_call_id: choice.message.tool_calls[0].id,
        content: JSON.stringify({ city: args.city, temperature: 21 }),
    });
    const second = await client.chat.completions.create({
        model, messages: convo, tools: [weather], tool_choice: 'none', max_tokens: 8, temperature: 0,
    });
    assert.equal(typeof second.choices[0].message.content, 'string');
    assert.equal(second.choices[0].message.tool_calls, undefined);
    assert.equal(second.choices[0].finish_reason, 'length');
});

test('a named function, streamed: the SDK assembles the tool call from its delta', T, async () => {
    const runner = client.chat.completions.stream({
        model, messages, tools: [weather], tool_choice: { type: 'function', function: { name: 'get_weather' } },
        max_tokens: 120, temperature: 1, seed: 3,
    });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(final.choices[0].message.tool_calls.length, 1);
    checkWeatherCall(final.choices[0].message.tool_calls[0]);
});

test('tools with tool_choice auto: a model that does not call answers with content', T, async () => {
    const r = await client.chat.completions.create({
        model, messages, tools: [weather], max_tokens: 6, temperature: 0,
    });
    const want = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0 });
    assert.equal(r.choices[0].message.tool_calls, undefined);
    assert.equal(r.choices[0].finish_reason, 'length');
    // the template (TinyLlama's) shows no tools: the same prompt, the same greedy reply
    assert.equal(r.choices[0].message.content, want.choices[0].message.content);
});

test('a schema the server cannot keep to: BadRequestError naming the place', T, async () => {
    const err = await expectAPIError(
        client.chat.completions.create({
            model, messages, response_format: {
                type: 'json_schema',
                json_schema: { name: 'x', schema: { type: 'object', properties: { d: { type: 'string', format: 'date' } } } },
            },
        }),
        OpenAI.BadRequestError,
        { status: 400, param: 'response_format.json_schema.schema' },
    );
    assert.match(err.error.message, /properties\.d/);
});

// ---- embeddings (the server runs with --embeddings: the bundled model's last token, normalized) ----

const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

test('embeddings: a list of strings, floats and base64 alike, each of length 1; the same input the same vector', T, async () => {
    const input = ['Once upon a time', 'The cat sat on the mat.', 'Once upon a time'];
    // the SDK asks for base64 and decodes it when no encoding_format is given
    const b64 = await client.embeddings.create({ model, input });
    const flt = await client.embeddings.create({ model, input, encoding_format: 'float' });
    for (const r of [b64, flt]) {
        assert.equal(r.object, 'list');
        assert.equal(r.model, model);
        assert.deepEqual(r.data.map((d) => d.index), [0, 1, 2]);
        for (const d of r.data) {
            assert.equal(d.object, 'embedding');
            assert.equal(d.embedding.length, 64, 'the model\'s hidden size');
            assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, `length ${norm(d.embedding)}`);
        }
        assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);
    }
    for (let i = 0; i < 3; i++) // base64 is the float32s' bytes: the same values, to float32
        b64.data[i].embedding.forEach((x, k) => assert.ok(Math.abs(x - flt.data[i].embedding[k]) < 1e-7));
    assert.ok(Math.abs(cosine(flt.data[0].embedding, flt.data[2].embedding) - 1) < 1e-6, 'the same input twice');
    assert.ok(cosine(flt.data[0].embedding, flt.data[1].embedding) < 0.999, 'different inputs differ');
    // token ids give the text's vector
    const ids = (await (await fetch(new URL('../tokenize', baseURL + '/').href, {
        method: 'POST', headers: { Authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ prompt: input[0] }),
    })).json()).tokens;
    const byIds = await client.embeddings.create({ model, input: [ids], encoding_format: 'float' });
    assert.ok(Math.abs(cosine(byIds.data[0].embedding, flt.data[0].embedding) - 1) < 1e-6, 'ids as the text');
});

test('embeddings: dimensions other than the model\'s and a missing input are BadRequestError naming them', T, async () => {
    await expectAPIError(client.embeddings.create({ model, input: 'x', dimensions: 32 }), OpenAI.BadRequestError,
        { status: 400, param: 'dimensions' });
    await expectAPIError(client.embeddings.create({ model }), OpenAI.BadRequestError, { status: 400, param: 'input' });
    await expectAPIError(client.embeddings.create({ model: 'other', input: 'x' }), OpenAI.NotFoundError,
        { status: 404, code: 'model_not_found' });
});

test('after all that: nothing running, no KV blocks held', T, async () => {
    await waitForGauges({ snug_num_requests_running: 0, snug_num_requests_waiting: 0, snug_kv_blocks_used: 0 });
});
