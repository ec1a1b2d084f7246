// snug's OpenAI Responses API (POST /v1/responses) driven by the official `openai` npm package:
// what a real client sends, parses and raises. Run by tests/client/client.sh, which starts the
// server (with --api-key and a chat template) and sets
//   SNUG_BASE_URL  e.g. http://127.0.0.1:PORT/v1
//   SNUG_API_KEY   the key the server was started with
// The model is the bundled models/stories260K (served as "stories260K", max-model-len 256): it
// writes children's stories, so the tests compare texts and token counts with what
// /v1/chat/completions gives for the same conversation (temperature 0 is deterministic) and never
// assert what the words are. The server is stateless: every request carries its conversation in
// input, and previous_response_id is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { eventNames, expectOpenAIError, serverMetrics } from './common.mjs';

const baseURL = process.env.SNUG_BASE_URL ?? 'http://127.0.0.1:8000/v1';
const apiKey = process.env.SNUG_API_KEY ?? 'test-key';
const model = process.env.SNUG_MODEL ?? 'stories260K';
// {base}/../metrics: the Prometheus page beside /v1
const metricsURL = new URL('../metrics', baseURL.endsWith('/') ? baseURL : baseURL + '/').href;

// maxRetries 0: an error status must reach the test as the SDK raised it, not be retried
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });

// every test's own time limit: a hung request fails its test, not the whole file
const T = { timeout: 15_000 };

const story = 'Tell me a story about a dog.';
const weatherQuestion = 'What is the weather in Paris?';

// the tool of the tool tests, in the Responses API's flat shape. maxLength, the enum and
// additionalProperties keep a call short (the model knows nothing of JSON: the call is
// constrained decoding's, and a free string could run to max_output_tokens); the checks below
// hold the server to them.
const weather = {
    type: 'function',
    name: 'get_weather',
    description: 'The weather in a city now',
    parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
    },
    strict: true,
};
// the same tool in chat completions' shape, for the requests the replies are compared with
const chatWeather = {
    type: 'function',
    function: { name: weather.name, description: weather.description, parameters: weather.parameters, strict: true },
};
// a call takes some 70 tokens here (the JSON's punctuation comes a token or two at a time): room
// for it, the prompt (about 40) still well within the 256 of the context
const CALL_TOKENS = 120;

// the schema of the structured-output tests: short enough to complete well within 40 tokens
const person = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer' } },
    required: ['name', 'age'],
    additionalProperties: false,
};
const personFormat = { type: 'json_schema', name: 'person', schema: person, strict: true };

// chat(params): /v1/chat/completions at temperature 0 (unless given), through the same SDK
function chat(params) {
    return client.chat.completions.create({ model, temperature: 0, ...params });
}

// textOf(r): the text of r's message items, their output_text parts joined in order (what the
// SDK's r.output_text is made of)
function textOf(r) {
    return r.output
        .filter((item) => item.type === 'message')
        .flatMap((item) => item.content.filter((c) => c.type === 'output_text').map((c) => c.text))
        .join('');
}

// checkMessageItem(item, cut): an output message item, whole: a msg_ id, status completed (or, where
// the reply ran out of max_output_tokens in it (cut true), incomplete; cut undefined: either), role
// assistant, one output_text part with no annotations
function checkMessageItem(item, cut) {
    assert.equal(item.type, 'message');
    assert.match(item.id, /^msg_[A-Za-z0-9_-]+$/);
    if (cut === undefined) assert.ok(['completed', 'incomplete'].includes(item.status), `status ${item.status}`);
    else assert.equal(item.status, cut ? 'incomplete' : 'completed');
    assert.equal(item.role, 'assistant');
    assert.equal(item.content.length, 1, `content ${JSON.stringify(item.content)}`);
    const part = item.content[0];
    assert.equal(part.type, 'output_text');
    assert.equal(typeof part.text, 'string');
    assert.deepEqual(part.annotations, []);
}

// checkWeatherCall(item): a function_call item calling get_weather as its schema says (fc_ id,
// call_ call_id, status completed, arguments a JSON string); returns the arguments parsed
function checkWeatherCall(item) {
    assert.equal(item.type, 'function_call');
    assert.match(item.id, /^fc_[A-Za-z0-9_-]+$/);
    assert.match(item.call_id, /^call_[A-Za-z0-9_-]+$/);
    assert.equal(item.name, 'get_weather');
    assert.equal(item.status, 'completed');
    assert.equal(typeof item.arguments, 'string');
    const args = JSON.parse(item.arguments);
    assert.deepEqual(Object.keys(args), ['city', 'unit'], item.arguments);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 12, `city ${JSON.stringify(args.city)} over maxLength 12`);
    assert.ok(['c', 'f'].includes(args.unit), item.arguments);
    return args;
}

// checkResponse(r, maxOutputTokens): r is a Responses reply of OpenAI's shape: a resp_ id,
// created_at in seconds, the served model, status completed or incomplete (then at
// max_output_tokens, exactly that many tokens generated), message and function_call items (ids
// distinct), the SDK's output_text their text, integer usage that adds up (no reasoning from this
// model), the stateless fields (store false, previous_response_id null) and no error. Returns r.
function checkResponse(r, maxOutputTokens) {
    assert.match(r.id, /^resp_[A-Za-z0-9_-]+$/);
    assert.equal(r.object, 'response');
    assert.ok(Number.isInteger(r.created_at), `created_at ${r.created_at}`);
    assert.ok(Math.abs(r.created_at - Date.now() / 1000) < 300, `created_at ${r.created_at}: seconds, now`);
    if (r.completed_at != null) {
        assert.ok(Number.isInteger(r.completed_at) && r.completed_at >= r.created_at, `completed_at ${r.completed_at}`);
    }
    assert.equal(r.model, model);
    assert.equal(r.error, null);
    assert.equal(r.previous_response_id, null);
    assert.equal(r.store, false, 'nothing is stored');
    assert.equal(r.max_output_tokens, maxOutputTokens);
    assert.ok(['completed', 'incomplete'].includes(r.status), `status ${r.status}`);
    if (r.status === 'incomplete') assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    else assert.equal(r.incomplete_details, null);
    assert.ok(Array.isArray(r.output), `output ${JSON.stringify(r.output)}`);
    for (const item of r.output) {
        assert.ok(['message', 'function_call'].includes(item.type), `an item of type ${item.type}`);
        if (item.type === 'message') checkMessageItem(item, r.status === 'incomplete');
        else checkWeatherCall(item);
    }
    assert.equal(new Set(r.output.map((item) => item.id)).size, r.output.length, 'item ids are distinct');
    assert.equal(r.output_text, textOf(r), 'the SDK\'s output_text');
    const u = r.usage;
    for (const k of ['input_tokens', 'output_tokens', 'total_tokens']) {
        assert.ok(Number.isInteger(u[k]) && u[k] >= 0, `usage.${k} ${u[k]}`);
    }
    assert.ok(u.input_tokens > 0, 'the input has tokens');
    assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
    const cached = u.input_tokens_details.cached_tokens;
    assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= u.input_tokens, `cached_tokens ${cached}`);
    assert.equal(u.output_tokens_details.reasoning_tokens, 0, 'no reasoning from this model');
    if (r.status === 'incomplete') assert.equal(u.output_tokens, maxOutputTokens);
    else assert.ok(u.output_tokens <= maxOutputTokens, `${u.output_tokens} tokens, max_output_tokens ${maxOutputTokens}`);
    return r;
}

// create(params): responses.create at temperature 0 (unless given), the reply checked
async function create(params) {
    return checkResponse(await client.responses.create({ model, temperature: 0, ...params }), params.max_output_tokens);
}

// sameAsChat(r, chatParams): r is what chat completions gives for the same conversation: the
// same text, the same prompt and output token counts, incomplete where chat's finish_reason is
// length. Returns the chat reply.
async function sameAsChat(r, chatParams) {
    const c = await chat(chatParams);
    assert.equal(textOf(r), c.choices[0].message.content ?? '', 'the chat\'s greedy text');
    assert.equal(r.usage.input_tokens, c.usage.prompt_tokens, 'the chat\'s prompt tokens');
    assert.equal(r.usage.output_tokens, c.usage.completion_tokens, 'the chat\'s completion tokens');
    assert.equal(r.status, c.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed',
        `status ${r.status}, the chat's finish_reason ${c.choices[0].finish_reason}`);
    return c;
}

// withoutIds(r): r less what differs from one reply to the next of the same request: its id,
// created_at and completed_at (where given), its items' ids and call_ids, the prefix cache's
// share of the input (cached_tokens), and the SDK's additions (output_text on create()'s replies;
// output_parsed, parsed and parsed_arguments on the stream helper's)
function withoutIds(r) {
    const { id, created_at, completed_at, output_text, output_parsed, ...rest } = r;
    rest.output = r.output.map(({ id, call_id, parsed_arguments, ...item }) => ({
        ...item,
        ...(item.content && { content: item.content.map(({ parsed, ...c }) => c) }),
    }));
    if (r.usage) {
        const { cached_tokens, ...details } = r.usage.input_tokens_details;
        rest.usage = { ...r.usage, input_tokens_details: details };
    }
    return rest;
}

const expectAPIError = (promise, Class, fields) => expectOpenAIError(OpenAI, promise, Class, fields);

// ---- the stream ----------------------------------------------------------------------------

// checkEventOrder(events): the events of one streamed reply, [{event, data}] (event: the SSE
// event name), in the documented order: response.created (status in_progress, no output), then
// response.in_progress; then per output item i = 0, 1, ...: response.output_item.added (output_index
// i, the item in_progress and empty: the SDK's helper builds it from the deltas), for a message
// response.content_part.added (an empty output_text part), response.output_text.delta*,
// response.output_text.done (the deltas joined), response.content_part.done (the whole text),
// for a function call response.function_call_arguments.delta*,
// response.function_call_arguments.done (the deltas joined), then response.output_item.done (the
// item whole, as the reply holds it); then response.completed or response.incomplete, whose
// response has the same id and created_at, the status its name says and the items as done. Each
// event's data has the type its name says and sequence_number 0, 1, 2, ... in order; each event
// of an item names its output_index and item_id; nothing follows the last. Returns what the
// events say: {created (response.created's response), response (the last event's), items
// (each {type, id, call_id, name, text, args, n_deltas})}.
function checkEventOrder(events) {
    const seen = (i) => `event ${i} of ${eventNames(events)}`;
    const out = { items: [] };
    let state = 'begin'; // then 'created', 'between' (no item open), 'item', 'text', 'text-done',
    // 'part-done', 'args', 'args-done', 'end'
    events.forEach(({ event, data }, i) => {
        assert.equal(data.type, event, `${seen(i)}: the data's type is the event's name`);
        assert.equal(data.sequence_number, i, `${seen(i)}: sequence_number`);
        const item = out.items.at(-1);
        // an event of the open item: its output_index and item_id
        const ofItem = () => {
            assert.equal(data.output_index, out.items.length - 1, `${seen(i)}: the open item's output_index`);
            assert.equal(data.item_id, item.id, `${seen(i)}: the open item's id`);
        };
        // an event of the open message's one part
        const ofPart = () => {
            ofItem();
            assert.equal(data.content_index, 0, `${seen(i)}: content_index`);
        };
        if (state === 'begin') {
            assert.equal(event, 'response.created', seen(i));
            const r = data.response;
            assert.match(r.id, /^resp_[A-Za-z0-9_-]+$/);
            assert.equal(r.object, 'response');
            assert.ok(Number.isInteger(r.created_at), `created_at ${r.created_at}`);
            assert.equal(r.model, model);
            assert.equal(r.status, 'in_progress');
            assert.deepEqual(r.output, []);
            out.created = r;
            state = 'created';
        } else if (state === 'created') {
            assert.equal(event, 'response.in_progress', seen(i));
            assert.equal(data.response.id, out.created.id, `${seen(i)}: the response's id`);
            assert.equal(data.response.status, 'in_progress');
            assert.deepEqual(data.response.output, []);
            state = 'between';
        } else if (state === 'between' && event === 'response.output_item.added') {
            assert.equal(data.output_index, out.items.length, `${seen(i)}: items are numbered from 0`);
            const it = data.item;
            assert.equal(it.status, 'in_progress', `${seen(i)}: the item added is in progress`);
            if (it.type === 'message') {
                assert.match(it.id, /^msg_[A-Za-z0-9_-]+$/);
                assert.equal(it.role, 'assistant');
                assert.deepEqual(it.content, [], `${seen(i)}: a message added has no parts yet`);
                state = 'item';
            } else if (it.type === 'function_call') {
                assert.match(it.id, /^fc_[A-Za-z0-9_-]+$/);
                assert.match(it.call_id, /^call_[A-Za-z0-9_-]+$/);
                assert.equal(typeof it.name, 'string');
                assert.equal(it.arguments, '', `${seen(i)}: a call added has no arguments yet`);
                state = 'args';
            } else {
                assert.fail(`${seen(i)}: an item of type ${it.type}`);
            }
            out.items.push({
                type: it.type, id: it.id, call_id: it.call_id, name: it.name, text: '', args: '', n_deltas: 0,
            });
        } else if (state === 'item' && event === 'response.content_part.added') {
            ofPart();
            assert.equal(data.part.type, 'output_text');
            assert.equal(data.part.text, '');
            state = 'text';
        } else if (state === 'text' && event === 'response.output_text.delta') {
            ofPart();
            assert.equal(typeof data.delta, 'string');
            item.text += data.delta;
            item.n_deltas++;
        } else if (state === 'text' && event === 'response.output_text.done') {
            ofPart();
            assert.equal(data.text, item.text, `${seen(i)}: the text is the deltas joined`);
            state = 'text-done';
        } else if (state === 'text-done' && event === 'response.content_part.done') {
            ofPart();
            assert.equal(data.part.type, 'output_text');
            assert.equal(data.part.text, item.text, `${seen(i)}: the part holds the whole text`);
            state = 'part-done';
        } else if (state === 'args' && event === 'response.function_call_arguments.delta') {
            ofItem();
            assert.equal(typeof data.delta, 'string');
            item.args += data.delta;
            item.n_deltas++;
        } else if (state === 'args' && event === 'response.function_call_arguments.done') {
            ofItem();
            assert.equal(data.arguments, item.args, `${seen(i)}: the arguments are the deltas joined`);
            state = 'args-done';
        } else if ((state === 'part-done' || state === 'args-done') && event === 'response.output_item.done') {
            assert.equal(data.output_index, out.items.length - 1, `${seen(i)}: the open item's output_index`);
            const it = data.item;
            assert.equal(it.id, item.id, `${seen(i)}: the item added`);
            if (it.type === 'message') {
                checkMessageItem(it);
                assert.equal(it.content[0].text, item.text, `${seen(i)}: the item's text`);
            } else {
                assert.equal(it.type, 'function_call');
                assert.equal(it.status, 'completed');
                assert.equal(it.call_id, item.call_id, `${seen(i)}: the call's call_id`);
                assert.equal(it.name, item.name, `${seen(i)}: the call's name`);
                assert.equal(it.arguments, item.args, `${seen(i)}: the call's arguments`);
            }
            item.done = it;
            state = 'between';
        } else if (state === 'between' && (event === 'response.completed' || event === 'response.incomplete')) {
            const r = data.response;
            assert.equal(r.id, out.created.id, `${seen(i)}: the response's id`);
            assert.equal(r.created_at, out.created.created_at, `${seen(i)}: created_at`);
            assert.equal(r.status, event === 'response.completed' ? 'completed' : 'incomplete', `${seen(i)}: status`);
            assert.deepEqual(r.output, out.items.map((it) => it.done), `${seen(i)}: the items as done`);
            out.response = r;
            state = 'end';
        } else {
            assert.fail(`${seen(i)}: ${event} where the state is ${state}`);
        }
    });
    assert.equal(state, 'end', `the stream ends with response.completed or response.incomplete: ${eventNames(events)}`);
    return out;
}

// sse(text): the server-sent events in a text/event-stream body, [{event, data}] (data: the data
// lines joined, unparsed), per the format: events end at a blank line, lines are `field: value`,
// a line starting with `:` is a comment
function sse(text) {
    const events = [];
    for (const block of text.replace(/\r\n?/g, '\n').split('\n\n')) {
        let event = null;
        const data = [];
        for (const line of block.split('\n')) {
            if (line === '' || line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') event = value;
            else if (field === 'data') data.push(value);
        }
        if (event !== null || data.length) events.push({ event, data: data.join('\n') });
    }
    return events;
}

// rawEvents(params): the server-sent events of responses.create({...params, stream: true}) as
// they came, [{event, data}] (data parsed): each a named event whose data is JSON (the SDK's own
// iteration keeps the data alone); the response must be text/event-stream.
async function rawEvents(params) {
    const response = await client.responses.create({ model, temperature: 0, ...params, stream: true }).asResponse();
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    return sse(await response.text()).map(({ event, data }, i) => {
        assert.ok(event, `event ${i} has no name: data ${data}`);
        let parsed;
        assert.doesNotThrow(() => { parsed = JSON.parse(data); }, `event ${i} (${event}): data ${data} is not JSON`);
        return { event, data: parsed };
    });
}

// helperEvents(stream): the events a responses.stream() helper emits, as checkEventOrder takes
// them, each copied as it arrives (the helper goes on to build its snapshot in the first)
function helperEvents(stream) {
    const events = [];
    stream.on('event', (e) => events.push({ event: e.type, data: structuredClone(e) }));
    return events;
}

const { waitForGauges } = serverMetrics(metricsURL, apiKey);

// ---- replies ----------------------------------------------------------------------------------

test('responses.create: one message item, incomplete at max_output_tokens, usage, resp_ and msg_ ids', T, async () => {
    const a = await create({ input: story, max_output_tokens: 12 });
    assert.equal(a.output.length, 1);
    assert.equal(a.output[0].type, 'message');
    assert.ok(a.output_text.length > 0);
    assert.equal(a.status, 'incomplete');
    assert.deepEqual(a.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(a.usage.output_tokens, 12);
    assert.equal(a.temperature, 0);
    // temperature 0: the same reply again, under ids of its own
    const b = await create({ input: story, max_output_tokens: 12 });
    assert.notEqual(b.id, a.id);
    assert.notEqual(b.output[0].id, a.output[0].id);
    assert.deepEqual(withoutIds(b), withoutIds(a));
});

test('input as a string, a message, a typed message of input_text: the chat\'s prompt and greedy text', T, async () => {
    const inputs = [
        story,
        [{ role: 'user', content: story }],
        [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: story }] }],
    ];
    for (const input of inputs) {
        const r = await create({ input, max_output_tokens: 12 });
        await sameAsChat(r, { messages: [{ role: 'user', content: story }], max_tokens: 12 });
    }
});

test('input_text parts are joined as chat completions joins text parts', T, async () => {
    const parts = ['Tell me a story', 'about a dog.'];
    const r = await create({
        input: [{ role: 'user', content: parts.map((text) => ({ type: 'input_text', text })) }], max_output_tokens: 10,
    });
    await sameAsChat(r, {
        messages: [{ role: 'user', content: parts.map((text) => ({ type: 'text', text })) }], max_tokens: 10,
    });
});

test('instructions are a system message first, as a system message in input is', T, async () => {
    const system = 'You tell short stories to children.';
    const plain = await create({ input: story, max_output_tokens: 10 });
    const r = await create({ instructions: system, input: story, max_output_tokens: 10 });
    assert.equal(r.instructions, system);
    const asSystem = [{ role: 'system', content: system }, { role: 'user', content: story }];
    await sameAsChat(r, { messages: asSystem, max_tokens: 10 });
    assert.ok(r.usage.input_tokens > plain.usage.input_tokens, 'the instructions are in the prompt');
    const s = await create({ input: asSystem, max_output_tokens: 10 });
    assert.deepEqual(s.output.map((item) => item.content), r.output.map((item) => item.content));
    assert.equal(s.usage.input_tokens, r.usage.input_tokens);
    // a developer message: accepted, read as system or passed on as chat passes it (this template
    // shows no developer role)
    const asDeveloper = [{ role: 'developer', content: system }, { role: 'user', content: story }];
    const d = await create({ input: asDeveloper, max_output_tokens: 10 });
    const asChat = await chat({ messages: asDeveloper, max_tokens: 10 });
    assert.ok([r.usage.input_tokens, asChat.usage.prompt_tokens].includes(d.usage.input_tokens),
        `${d.usage.input_tokens} input tokens with a developer message: neither a system message's ` +
        `${r.usage.input_tokens} nor the chat's ${asChat.usage.prompt_tokens}`);
});

test('a multi-turn input: an assistant turn of output_text, a reply\'s own output items sent back', T, async () => {
    const then = 'And then?';
    const turn = 'Once upon a time, there was a dog.';
    const r = await create({
        input: [
            { role: 'user', content: story },
            { role: 'assistant', content: [{ type: 'output_text', text: turn }] },
            { role: 'user', content: then },
        ],
        max_output_tokens: 8,
    });
    await sameAsChat(r, {
        messages: [{ role: 'user', content: story }, { role: 'assistant', content: turn }, { role: 'user', content: then }],
        max_tokens: 8,
    });
    // stateless, the way a client carries on: the first reply's output items, as returned, in the
    // next request's input
    const first = await create({ input: story, max_output_tokens: 8 });
    const next = await create({
        input: [{ role: 'user', content: story }, ...first.output, { role: 'user', content: then }], max_output_tokens: 8,
    });
    await sameAsChat(next, {
        messages: [
            { role: 'user', content: story }, { role: 'assistant', content: first.output_text }, { role: 'user', content: then },
        ],
        max_tokens: 8,
    });
    assert.ok(next.usage.input_tokens > first.usage.input_tokens, 'every turn is in the prompt');
});

test('reasoning items in input and reasoning.effort are accepted; no reasoning from this model', T, async () => {
    const turn = 'Once upon a time, there was a dog.';
    const r = await create({
        input: [
            { role: 'user', content: story },
            {
                type: 'reasoning', id: 'rs_0123456789', summary: [],
                content: [{ type: 'reasoning_text', text: 'A dog story, then.' }],
            },
            { role: 'assistant', content: [{ type: 'output_text', text: turn }] },
            { role: 'user', content: 'And then?' },
        ],
        reasoning: { effort: 'low' },
        max_output_tokens: 8,
    });
    assert.ok(!r.output.some((item) => item.type === 'reasoning'), 'no reasoning item from a model that does not think');
    // the chat's reasoning_content: this template shows none, as it shows no reasoning item
    await sameAsChat(r, {
        messages: [
            { role: 'user', content: story },
            { role: 'assistant', content: turn, reasoning_content: 'A dog story, then.' },
            { role: 'user', content: 'And then?' },
        ],
        max_tokens: 8,
    });
});

test('the request\'s fields are echoed; store is accepted and the reply says store false', T, async () => {
    const params = {
        instructions: 'You tell stories.', input: story, max_output_tokens: 10, temperature: 0, top_p: 1,
        metadata: { run: 'responses.test', n: '1' }, tools: [weather], tool_choice: 'auto', parallel_tool_calls: false,
        text: { format: { type: 'text' } }, store: true, user: 'tester',
    };
    const r = await create(params);
    assert.equal(r.instructions, params.instructions);
    assert.equal(r.max_output_tokens, 10);
    assert.equal(r.temperature, 0);
    assert.equal(r.top_p, 1);
    assert.deepEqual(r.metadata, params.metadata);
    assert.deepEqual(r.tools.map(({ type, name, parameters }) => ({ type, name, parameters })),
        [{ type: 'function', name: weather.name, parameters: weather.parameters }]);
    assert.equal(r.tool_choice, 'auto');
    assert.equal(r.parallel_tool_calls, false);
    assert.equal(r.text.format.type, 'text');
    assert.equal(r.store, false);
    // none of them moves the greedy reply (this template shows no tools)
    const plain = await create({ instructions: params.instructions, input: story, max_output_tokens: 10 });
    assert.equal(r.output_text, plain.output_text);
    assert.equal(r.usage.input_tokens, plain.usage.input_tokens);
    // a named function and a json_schema format, echoed as given
    const named = await create({
        input: weatherQuestion, max_output_tokens: CALL_TOKENS, tools: [weather],
        tool_choice: { type: 'function', name: 'get_weather' },
    });
    assert.deepEqual(named.tool_choice, { type: 'function', name: 'get_weather' });
    const structured = await create({ input: story, max_output_tokens: 40, text: { format: personFormat } });
    assert.equal(structured.text.format.type, 'json_schema');
    assert.equal(structured.text.format.name, 'person');
    assert.deepEqual(structured.text.format.schema, person);
});

test('usage: the same long input again has cached_tokens from the prefix cache', T, async () => {
    // an input no other test sends (its first words are this run's own), of some 100 tokens
    const tag = `Day ${Math.floor(Math.random() * 1e6)}.`;
    const input = `${tag} ${'The cat and the dog played in the park. '.repeat(8)}`;
    const a = await create({ input, max_output_tokens: 4 });
    const b = await create({ input, max_output_tokens: 4 });
    assert.ok(a.usage.input_tokens > 64, `${a.usage.input_tokens} input tokens`);
    assert.equal(a.usage.input_tokens_details.cached_tokens, 0, 'an input never seen: nothing from the cache');
    assert.equal(b.usage.input_tokens, a.usage.input_tokens, 'input_tokens counts the cached tokens too');
    assert.ok(b.usage.input_tokens_details.cached_tokens > 0, `the second time: ${JSON.stringify(b.usage)}`);
    assert.deepEqual(withoutIds(b), withoutIds(a));
});

// ---- streaming --------------------------------------------------------------------------------

test('streaming: the server-sent events in the documented order, the reply whole at the end', T, async () => {
    const want = await create({ input: story, max_output_tokens: 12 });
    const got = checkEventOrder(await rawEvents({ input: story, max_output_tokens: 12 }));
    assert.equal(got.items.length, 1);
    assert.equal(got.items[0].type, 'message');
    assert.equal(got.items[0].text, want.output_text);
    assert.ok(got.items[0].n_deltas > 1, `${got.items[0].n_deltas} text deltas: the text comes as it is made`);
    assert.equal(got.response.status, 'incomplete');
    assert.deepEqual(got.response.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(got.created.max_output_tokens, 12);
    assert.notEqual(got.response.id, want.id);
    // the last event's response is the non-streamed reply, ids aside
    assert.deepEqual(withoutIds(got.response), withoutIds(want));
});

test('streaming: the SDK\'s parsed events (create with stream: true) pass the same checks', T, async () => {
    const want = await create({ input: story, max_output_tokens: 10, instructions: 'You tell stories.' });
    const stream = await client.responses.create({
        model, input: story, max_output_tokens: 10, instructions: 'You tell stories.', temperature: 0, stream: true,
    });
    const events = [];
    for await (const e of stream) events.push({ event: e.type, data: e });
    const got = checkEventOrder(events);
    assert.deepEqual(got.items.map((it) => [it.type, it.text]), [['message', want.output_text]]);
    assert.deepEqual(withoutIds(got.response), withoutIds(want));
});

test('responses.stream(): its output_text.delta events join to the text of an incomplete reply', T, async () => {
    const want = await create({ input: story, max_output_tokens: 16 });
    const stream = client.responses.stream({ model, input: story, max_output_tokens: 16, temperature: 0 });
    const events = helperEvents(stream);
    const pieces = [];
    const snapshots = [];
    stream.on('response.output_text.delta', (e) => {
        pieces.push(e.delta);
        snapshots.push(e.snapshot);
    });
    const final = await stream.finalResponse();
    assert.equal(pieces.join(''), want.output_text);
    assert.ok(pieces.length > 1, `${pieces.length} delta events`);
    assert.equal(snapshots.at(-1), want.output_text, 'the helper\'s snapshot of the text');
    const got = checkEventOrder(events);
    assert.deepEqual(withoutIds(got.response), withoutIds(want));
    // finalResponse(): the helper takes response.completed's response as the final one, and
    // otherwise keeps what it built from the events (response.created's, the items added, the
    // deltas); the text, at least, is the reply's
    assert.equal(final.id, got.created.id);
    assert.equal(textOf(final), want.output_text);
});

test('responses.stream() of a completed reply (json_schema): finalResponse() is the non-streamed reply', T, async () => {
    const params = { model, input: story, max_output_tokens: 40, temperature: 0, text: { format: personFormat } };
    const want = await create(params);
    assert.equal(want.status, 'completed', want.output_text);
    const stream = client.responses.stream(params);
    const events = helperEvents(stream);
    const final = await stream.finalResponse();
    const got = checkEventOrder(events);
    assert.equal(got.response.status, 'completed');
    assert.equal(final.status, 'completed');
    assert.deepEqual(withoutIds(final), withoutIds(want));
    assert.equal(final.id, got.created.id);
});

// ---- structured output ------------------------------------------------------------------------

test('text.format json_schema: output_text parses and validates, chat\'s response_format text', T, async () => {
    const r = await create({ input: story, max_output_tokens: 40, text: { format: personFormat } });
    assert.equal(r.status, 'completed', r.output_text);
    const value = JSON.parse(r.output_text);
    assert.deepEqual(Object.keys(value), ['name', 'age'], r.output_text);
    assert.equal(typeof value.name, 'string');
    assert.ok([...value.name].length <= 8, `name ${JSON.stringify(value.name)} over maxLength 8`);
    assert.ok(Number.isInteger(value.age), r.output_text);
    await sameAsChat(r, {
        messages: [{ role: 'user', content: story }], max_tokens: 40,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
    });
});

test('text.format json_object: chat\'s json_object text, an object when complete', T, async () => {
    // greedy, this model opens an object and never closes it within a short budget: the text
    // is compared with the chat's under the same constraint, and parsed where complete
    const r = await create({ input: story, max_output_tokens: 24, text: { format: { type: 'json_object' } } });
    assert.equal(r.text.format.type, 'json_object');
    assert.match(r.output_text, /^\s*\{/, r.output_text);
    await sameAsChat(r, {
        messages: [{ role: 'user', content: story }], max_tokens: 24, response_format: { type: 'json_object' },
    });
    if (r.status === 'completed') {
        const value = JSON.parse(r.output_text);
        assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), r.output_text);
    }
});

// ---- function calls ---------------------------------------------------------------------------

test('tool_choice required: one function_call item, arguments per the schema, the call chat makes', T, async () => {
    const r = await create({
        input: weatherQuestion, tools: [weather], tool_choice: 'required', parallel_tool_calls: false,
        max_output_tokens: CALL_TOKENS,
    });
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.output.map((item) => item.type), ['function_call']);
    checkWeatherCall(r.output[0]);
    assert.equal(r.output_text, '');
    const c = await sameAsChat(r, {
        messages: [{ role: 'user', content: weatherQuestion }], tools: [chatWeather], tool_choice: 'required',
        parallel_tool_calls: false, max_tokens: CALL_TOKENS,
    });
    assert.equal(c.choices[0].message.tool_calls.length, 1);
    assert.equal(r.output[0].arguments, c.choices[0].message.tool_calls[0].function.arguments);
});

test('a named function streamed: arguments deltas join to the call; finalResponse() is the reply', T, async () => {
    const params = {
        model, input: weatherQuestion, tools: [weather], tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false, max_output_tokens: CALL_TOKENS, temperature: 0,
    };
    const want = await create(params);
    assert.deepEqual(want.output.map((item) => item.type), ['function_call']);
    checkWeatherCall(want.output[0]);
    // the raw events
    const raw = checkEventOrder(await rawEvents(params));
    assert.deepEqual(raw.items.map((it) => [it.type, it.name, it.args]),
        [['function_call', 'get_weather', want.output[0].arguments]]);
    assert.deepEqual(withoutIds(raw.response), withoutIds(want));
    // the helper: its function_call_arguments.delta events and final response
    const stream = client.responses.stream(params);
    const events = helperEvents(stream);
    const pieces = [];
    stream.on('response.function_call_arguments.delta', (e) => pieces.push(e.delta));
    const final = await stream.finalResponse();
    checkEventOrder(events);
    assert.equal(pieces.join(''), want.output[0].arguments);
    assert.equal(final.status, 'completed');
    assert.deepEqual(withoutIds(final), withoutIds(want));
});

test('a function-calling loop: the call and its output sent back, tool_choice none: a message', T, async () => {
    const question = { role: 'user', content: weatherQuestion };
    const first = await create({
        input: [question], tools: [weather], tool_choice: 'required', parallel_tool_calls: false,
        max_output_tokens: CALL_TOKENS,
    });
    const [call] = first.output;
    const args = checkWeatherCall(call);
    const output = JSON.stringify({ city: args.city, temperature: 21 });
    const second = await create({
        input: [question, call, { type: 'function_call_output', call_id: call.call_id, output }],
        tools: [weather], tool_choice: 'none', max_output_tokens: 8,
    });
    assert.deepEqual(second.output.map((item) => item.type), ['message']);
    assert.ok(second.output_text.length > 0);
    assert.ok(second.usage.input_tokens > first.usage.input_tokens, 'the call is in the prompt');
    // the same turns as chat messages: the call an assistant's tool_calls, its output a tool message
    await sameAsChat(second, {
        messages: [
            question,
            {
                role: 'assistant', content: null,
                tool_calls: [{ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } }],
            },
            { role: 'tool', tool_call_id: call.call_id, content: output },
        ],
        tools: [chatWeather], tool_choice: 'none', max_tokens: 8,
    });
});

test('tools with tool_choice auto or none: no call, the reply as without tools', T, async () => {
    const plain = await create({ input: weatherQuestion, max_output_tokens: 12 });
    for (const toolChoice of ['auto', 'none', undefined]) {
        const r = await create({ input: weatherQuestion, tools: [weather], tool_choice: toolChoice, max_output_tokens: 12 });
        assert.deepEqual(r.output.map((item) => item.type), ['message'], `tool_choice ${toolChoice}`);
        // the template (TinyLlama's) shows no tools: the same prompt, the same greedy reply
        assert.equal(r.output_text, plain.output_text, `tool_choice ${toolChoice}`);
        assert.equal(r.usage.input_tokens, plain.usage.input_tokens, `tool_choice ${toolChoice}`);
    }
});

// ---- errors -----------------------------------------------------------------------------------

test('previous_response_id: BadRequestError naming it, the server keeps no responses', T, async () => {
    const first = await create({ input: story, max_output_tokens: 4 });
    for (const stream of [false, true]) {
        const err = await expectAPIError(
            client.responses.create({
                model, input: 'And then?', previous_response_id: first.id, max_output_tokens: 4, stream,
            }),
            OpenAI.BadRequestError,
            { status: 400, param: 'previous_response_id', type: 'invalid_request_error' },
        );
        assert.match(err.error.message, /stateless|keeps no|not stored|no responses/i, err.error.message);
        assert.match(err.error.message, /\binput\b/, 'it says to send the conversation in input');
    }
});

test('an unknown field: BadRequestError naming it, streamed or not', T, async () => {
    for (const stream of [false, true]) {
        const err = await expectAPIError(
            client.responses.create({ model, input: story, max_output_tokens: 4, frobnicate: true, stream }),
            OpenAI.BadRequestError,
            { status: 400, param: 'frobnicate', type: 'invalid_request_error' },
        );
        assert.match(err.error.message, /frobnicate/);
    }
});

test('a bad temperature, no input: BadRequestError naming the field', T, async () => {
    await expectAPIError(
        client.responses.create({ model, input: story, max_output_tokens: 4, temperature: -1 }),
        OpenAI.BadRequestError,
        { status: 400, param: 'temperature', type: 'invalid_request_error' },
    );
    await expectAPIError(
        client.responses.create({ model, max_output_tokens: 4 }),
        OpenAI.BadRequestError,
        { status: 400, param: 'input', type: 'invalid_request_error' },
    );
});

test('an unknown model: NotFoundError; an input over the model length: context_length_exceeded', T, async () => {
    for (const stream of [false, true]) {
        await expectAPIError(
            client.responses.create({ model: 'gpt-9', input: story, max_output_tokens: 4, stream }),
            OpenAI.NotFoundError,
            { status: 404, code: 'model_not_found' },
        );
    }
    await expectAPIError(
        // 400 tokens, over 256
        client.responses.create({ model, input: 'Once upon a time '.repeat(100), max_output_tokens: 4 }),
        OpenAI.BadRequestError,
        { status: 400, code: 'context_length_exceeded' },
    );
});

test('a wrong API key: AuthenticationError, streamed or not', T, async () => {
    const wrong = new OpenAI({ baseURL, apiKey: apiKey + '-wrong', maxRetries: 0, timeout: 20_000 });
    for (const stream of [false, true]) {
        await expectAPIError(
            wrong.responses.create({ model, input: story, max_output_tokens: 4, stream }),
            OpenAI.AuthenticationError,
            { status: 401 },
        );
    }
});

// ---- the server under load and abandoned streams -------------------------------------------

test('concurrent requests: 4 streamed and 4 not at once, each the greedy text', T, async () => {
    const params = { model, input: story, max_output_tokens: 16, temperature: 0 };
    const want = (await create(params)).output_text;
    const plain = Array.from({ length: 4 }, async () => (await client.responses.create(params)).output_text);
    const streamed = Array.from({ length: 4 }, async () => textOf(await client.responses.stream(params).finalResponse()));
    assert.deepEqual(await Promise.all([...plain, ...streamed]), Array(8).fill(want));
});

test('a stream the client leaves after 3 events: the server goes on', T, async () => {
    const stream = await client.responses.create({
        model, input: story, max_output_tokens: 200, temperature: 0, stream: true,
    });
    let n = 0;
    for await (const e of stream) {
        assert.equal(e.sequence_number, n);
        if (++n === 3) break; // the SDK aborts the request
    }
    assert.equal(n, 3);
    const r = await create({ input: story, max_output_tokens: 4 });
    assert.equal(r.usage.output_tokens, 4);
    await waitForGauges({ snug_num_requests_running: 0 });
});

test('after all that: nothing running, no KV blocks held', T, async () => {
    await waitForGauges({ snug_num_requests_running: 0, snug_num_requests_waiting: 0, snug_kv_blocks_used: 0 });
});
