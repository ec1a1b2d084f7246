// Structured output from `snug serve`: response_format json_schema and json_object, GBNF
// grammars and tool calls, on /v1/completions and /v1/chat/completions, streamed and not. What the model says
// is random (the bundled models/stories260K knows nothing of JSON, sampled at temperature 1), so
// every check is on the shape of the output: the grammar alone must make it valid.
//
// One server on the bundled model, on a free port of 127.0.0.1 (--max-model-len 512,
// --threads 1, --no-access-log), then:
//   1. schemas: SCHEMAS JSON schemas made by a seeded generator (the same ones every run):
//      nested objects (optional properties, additionalProperties false or absent), arrays with
//      minItems/maxItems, strings with minLength/maxLength, integers, numbers, booleans, null,
//      enums and consts of every kind, anyOf, oneOf, allOf, type lists, $defs/definitions with
//      $ref, and a recursive $ref. Every string and array is bounded, so that an answer fits in
//      MAX_TOKENS. Each is asked once, by turns to both endpoints, streamed and not, a few at a
//      time (a batch holds sequences under different grammars); each answer must end with
//      finish_reason "stop", parse with JSON.parse and validate against its schema (validate()
//      below: the generated subset, strings' lengths in code points, and objects with only their
//      declared keys, in the declared order, as the server writes them), and keep to the
//      grammar's bounds on whitespace and digits (layoutFailure()).
//   2. strings of escapes and multi-byte characters (a logit_bias makes the model write them):
//      valid, lengths in code points, and the same text streamed.
//   3. json_object: the model hardly ever picks the byte token "}" unaided, so unbiased answers
//      run to max_tokens: they must then be a JSON object cut short (jsonPrefix()). With a
//      logit_bias toward "}" and '"' at least half must end with "stop", and those parse as
//      objects (the rest must be objects cut short).
//   4. GBNF: alternatives, a class with a bounded repetition, rules and UTF-8 literals; each
//      answer matches the equivalent regular expression and ends with "stop".
//   5. n = 3: every choice validates; the same seed again, streamed or not, gives the same texts.
//   6. tool calls that must be made: twelve generated object schemas as the parameters of three
//      tools at a time; tool_choice "required" (one call, and parallel calls streamed, a
//      logit_bias toward "]" so that lists end) and a named function, streamed and not: every
//      call has an id, type "function", a name of the tools (the named one) and arguments that
//      parse and validate against its parameters, with finish_reason "tool_calls".
//   7. the other servers' fields: vLLM's guided_choice (the answer one of the strings, whole),
//      guided_json and structured_outputs, llama.cpp's json_schema.
//   8. bad schemas and grammars: 400s in OpenAI's shape with the right param and message.
//   9. the server still answers /health, and exits 0 on SIGTERM.
//
// Usage: node tests/server/structured.mjs BUILD_DIR (default build), from anywhere. Prints one
// "ok - ..." / "FAIL - ..." line per check (a failure's details indented under it) and a final
// "N passed, M failed" (see tests/run); exit status 1 if any failed. A watchdog fails the file
// at 100 s. Only node's built-in modules.
import { addToolCallDelta, check, fail, show, postJson, Server, run } from '../lib/harness.mjs';

const SCHEMAS = 80; // generated schemas
const SCHEMA_SEED = 20261202; // the generator's seed: the same schemas every run
const PARALLEL = 4; // schema requests in flight at once
const MAX_TOKENS = 400; // per answer; the model's length is 512 and the prompts are short
const REQUEST_MS = 30_000; // one request's limit

// ---- a seeded generator of JSON schemas -----------------------------------------------------

// prng(seed): mulberry32, numbers in [0, 1)
function prng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = Math.imul(a ^ (a >>> 15), a | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

// names and values with quotes, backslashes, tabs and non-ASCII, which the grammar must escape
const NAMES = ['id', 'name', 'age', 'tags', 'ok', 'kind', 'score', 'items', 'note', 'size', 'when', 'pos',
    'meta', 'x', 'y', 'déjà vu', 'say "hi"', 'back\\slash'];
const STRINGS = ['red', 'green', 'blue', '', 'naïve', 'say "hi"', 'a\\b', '日本', 'tab\there'];
const NUMBERS = [0, 1, -3, 42, 2.5, -0.125, 0.1, 1000000];
const OTHERS = [null, true, false, { a: 1 }, [1, 'x']];
const MAX_CHARS = 220; // the longest answer a schema may allow, whitespace aside

class SchemaGen {
    constructor(seed) {
        this.rng = prng(seed);
        this.defs = null; // {key: "$defs" or "definitions", names}: what a $ref may name
    }

    int(lo, hi) { return lo + Math.floor(this.rng() * (hi - lo + 1)); }
    pick(xs) { return xs[Math.floor(this.rng() * xs.length)]; }
    chance(p) { return this.rng() < p; }
    picks(xs, n) { // n distinct elements of xs
        const left = [...xs];
        return Array.from({ length: Math.min(n, xs.length) }, () => left.splice(this.int(0, left.length - 1), 1)[0]);
    }

    // schema k: an object mostly; one in four with $defs that its properties $ref
    make(k) {
        this.defs = null;
        if (k % 4 !== 3) return this.chance(0.75) ? this.object(0) : this.any(0);
        const key = k % 8 === 3 ? '$defs' : 'definitions';
        const defs = { point: this.object(2), label: this.chance(0.5) ? this.string() : this.enum() };
        this.defs = { key, names: Object.keys(defs) };
        return { ...this.object(0, { where: { $ref: `#/${key}/point` } }), [key]: defs };
    }

    // any(depth): a schema of a kind chosen by weight; containers only above depth 3
    any(depth) {
        const deep = depth >= 3;
        const kinds = [['object', deep ? 0 : 3], ['array', deep ? 0 : 2], ['string', 3], ['integer', 2],
            ['number', 1], ['boolean', 1], ['null', 1], ['enum', 2], ['const', 1], ['anyOf', deep ? 0 : 2],
            ['oneOf', deep ? 0 : 1], ['allOf', deep ? 0 : 1], ['types', 1], ['ref', this.defs ? 2 : 0]];
        let r = this.rng() * kinds.reduce((n, [, w]) => n + w, 0);
        const [kind] = kinds.find(([, w]) => (r -= w) < 0);
        return this.of(kind, depth);
    }

    of(kind, depth) {
        switch (kind) {
        case 'object': return this.object(depth);
        case 'array': return this.array(depth);
        case 'string': return this.string();
        case 'enum': return this.enum();
        case 'const': return { const: this.pick([...STRINGS, ...NUMBERS, ...OTHERS]) };
        case 'anyOf': return this.alternatives('anyOf', ['string', 'integer', 'number', 'boolean', 'null',
            'enum', depth < 2 ? 'object' : 'array'], depth);
        case 'oneOf': // disjoint types: exactly one alternative matches
            return this.alternatives('oneOf', ['string', 'integer', 'boolean', 'null', depth < 2 ? 'object' : 'array'],
                depth);
        case 'allOf': return { allOf: [this.any(depth + 1)] };
        case 'types': return this.types();
        case 'ref': return { $ref: `#/${this.defs.key}/${this.pick(this.defs.names)}` };
        default: return { type: kind }; // integer, number, boolean, null
        }
    }

    object(depth, { where } = {}) {
        const names = this.picks(NAMES, this.int(1, depth === 0 ? 5 : 3));
        const properties = {};
        if (where) properties.where = where;
        for (const n of names) properties[n] = this.any(depth + 1);
        const required = Object.keys(properties).filter(() => this.chance(0.6));
        const s = { type: 'object', properties, required };
        if (this.chance(0.5)) s.additionalProperties = false;
        return s;
    }

    array(depth) {
        const minItems = this.int(0, 2);
        const s = { type: 'array', items: this.any(depth + 1), maxItems: this.int(minItems, 3) };
        if (minItems || this.chance(0.5)) s.minItems = minItems;
        return s;
    }

    string() {
        const s = { type: 'string', maxLength: this.int(0, 12) };
        if (this.chance(0.3)) s.minLength = this.int(0, Math.min(3, s.maxLength));
        return s;
    }

    enum() {
        const pool = this.pick([STRINGS, NUMBERS, [...STRINGS, null], [...STRINGS, ...NUMBERS, ...OTHERS]]);
        return { enum: this.picks(pool, this.int(1, 4)) };
    }

    alternatives(key, kinds, depth) {
        return { [key]: this.picks(kinds, this.int(2, 3)).map((k) => this.of(k, depth + 1)) };
    }

    types() {
        const type = this.pick([['string', 'null'], ['integer', 'boolean'], ['number', 'string'],
            ['boolean', 'null', 'integer']]);
        return type.includes('string') ? { type, maxLength: this.int(1, 12) } : { type };
    }
}

// a linked list by $ref: recursion the generator does not make
const RECURSIVE = {
    $defs: {
        node: {
            type: 'object',
            properties: { v: { type: 'integer' }, next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } },
            required: ['v', 'next'],
            additionalProperties: false,
        },
    },
    $ref: '#/$defs/node',
};

// resolve(rootSchema, ref): the schema "#/$defs/NAME" or "#/definitions/NAME" names
function resolve(rootSchema, ref) {
    const [, key, name] = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref) ?? [];
    const s = key && rootSchema[key]?.[name];
    if (!s) throw new Error(`the test's own schema has a bad $ref ${ref}`);
    return s;
}

// maxChars(s, rootSchema): the longest JSON text s admits, whitespace aside (a string's
// characters as two-byte escapes); the generator keeps it under MAX_CHARS. Not for RECURSIVE.
function maxChars(s, rootSchema) {
    const m = (x) => maxChars(x, rootSchema);
    if (s.$ref) return m(resolve(rootSchema, s.$ref));
    if ('const' in s) return JSON.stringify(s.const).length;
    if (s.enum) return Math.max(...s.enum.map((v) => JSON.stringify(v).length));
    if (s.anyOf || s.oneOf) return Math.max(...(s.anyOf ?? s.oneOf).map(m));
    if (s.allOf) return m(s.allOf[0]);
    const one = {
        string: () => 2 + 2 * s.maxLength,
        integer: () => 17,
        number: () => 37,
        boolean: () => 5,
        null: () => 4,
        array: () => 2 + s.maxItems * (m(s.items) + 1),
        object: () => Object.entries(s.properties).reduce((n, [k, v]) => n + JSON.stringify(k).length + 2 + m(v), 2),
    };
    return Math.max(...[s.type].flat().map((t) => one[t]()));
}

// generateSchemas(): SCHEMAS schemas (the last the recursive one), each under MAX_CHARS
function generateSchemas() {
    const gen = new SchemaGen(SCHEMA_SEED);
    const out = [];
    for (let k = 0; out.length < SCHEMAS - 1; k++) {
        const s = gen.make(k);
        if (maxChars(s, s) <= MAX_CHARS) out.push(s);
    }
    out.push(RECURSIVE);
    return out;
}

// ---- validating answers ---------------------------------------------------------------------

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

function deepEqual(a, b) {
    if (a === b) return true;
    if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
    if (!isObject(a) || !isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
}

const TYPES = {
    object: isObject,
    array: Array.isArray,
    string: (v) => typeof v === 'string',
    integer: Number.isInteger,
    number: (v) => typeof v === 'number' && Number.isFinite(v),
    boolean: (v) => typeof v === 'boolean',
    null: (v) => v === null,
};

// validate(v, s, rootSchema, at): null when value v validates against schema s; else the first
// thing wrong, at its path. Every keyword present applies. Objects may hold only their declared
// properties, in the order declared (additionalProperties is false or absent in these schemas,
// and the server writes properties in their order).
function validate(v, s, rootSchema, at = '$') {
    const sub = (x, ss, where) => validate(x, ss, rootSchema, where);
    if (s === true || (isObject(s) && Object.keys(s).length === 0)) return null;
    if (s.$ref) {
        const e = sub(v, resolve(rootSchema, s.$ref), at);
        if (e) return e;
    }
    if ('const' in s && !deepEqual(v, s.const)) return `${at}: ${show(v)} is not the const ${show(s.const)}`;
    if (s.enum && !s.enum.some((x) => deepEqual(v, x))) return `${at}: ${show(v)} is not in the enum ${show(s.enum)}`;
    if (s.anyOf && s.anyOf.every((x) => sub(v, x, at))) return `${at}: ${show(v)} matches no anyOf alternative`;
    if (s.oneOf) {
        const n = s.oneOf.filter((x) => !sub(v, x, at)).length;
        if (n !== 1) return `${at}: ${show(v)} matches ${n} oneOf alternatives, not 1`;
    }
    for (const x of s.allOf ?? []) {
        const e = sub(v, x, at);
        if (e) return e;
    }
    if (s.type && ![s.type].flat().some((t) => TYPES[t](v))) return `${at}: ${show(v)} is not of type ${show(s.type)}`;
    if (typeof v === 'string') {
        const n = [...v].length;
        if (n < (s.minLength ?? 0) || n > (s.maxLength ?? Infinity)) {
            return `${at}: ${show(v)} has ${n} code points, not ${s.minLength ?? 0} to ${s.maxLength ?? 'any'}`;
        }
    }
    if (Array.isArray(v)) {
        if (v.length < (s.minItems ?? 0) || v.length > (s.maxItems ?? Infinity)) {
            return `${at}: ${v.length} items, not ${s.minItems ?? 0} to ${s.maxItems ?? 'any'}`;
        }
        for (let i = 0; i < v.length && s.items; i++) {
            const e = sub(v[i], s.items, `${at}[${i}]`);
            if (e) return e;
        }
    }
    if (isObject(v) && (s.properties || s.type === 'object')) return validateObject(v, s, rootSchema, at);
    return null;
}

function validateObject(v, s, rootSchema, at) {
    const declared = Object.keys(s.properties ?? {});
    const keys = Object.keys(v);
    const extra = keys.find((k) => !declared.includes(k));
    if (extra !== undefined) return `${at}: the key ${show(extra)} is not declared`;
    const missing = (s.required ?? []).find((k) => !(k in v));
    if (missing !== undefined) return `${at}: the required key ${show(missing)} is missing`;
    const order = declared.filter((k) => k in v);
    if (!deepEqual(keys, order)) return `${at}: keys ${show(keys)}, not in the declared order ${show(order)}`;
    for (const k of keys) {
        const e = validate(v[k], s.properties[k], rootSchema, `${at}.${k}`);
        if (e) return e;
    }
    return null;
}

// jsonPrefix(text): "whole" when text is one JSON object (whitespace around it allowed),
// "prefix" when it is the start of one cut short, else where and why it is neither
function jsonPrefix(text) {
    const CUT = Symbol('cut');
    let i = 0;
    const peek = () => {
        if (i >= text.length) throw CUT;
        return text[i];
    };
    const bad = (what) => {
        throw new Error(`at offset ${i}: expected ${what}, got ${show(text.slice(i, i + 20))}`);
    };
    const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };
    const word = (w) => { for (const c of w) if (peek() === c) i++; else bad(w); };
    const string = () => {
        word('"');
        for (let c = peek(); c !== '"'; c = peek()) {
            i++;
            if (c < ' ') bad('no control character in a string');
            if (c !== '\\') continue;
            const e = peek();
            i++;
            if (e === 'u') for (let k = 0; k < 4; k++) if (/[0-9a-fA-F]/.test(peek())) i++; else bad('a hex digit');
            else if (!'"\\/bfnrt'.includes(e)) bad('an escape');
        }
        i++;
    };
    const number = () => {
        const part = /^-?[0-9]*(\.[0-9]*)?([eE][-+]?[0-9]*)?/.exec(text.slice(i))[0];
        if (i + part.length === text.length) throw CUT;
        if (!/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/.test(part)) bad('a number');
        i += part.length;
    };
    const list = (open, close, item) => {
        word(open);
        ws();
        if (peek() === close) return i++;
        for (;;) {
            item();
            ws();
            if (peek() === close) return i++;
            word(',');
            ws();
        }
    };
    const value = () => {
        const c = peek();
        if (c === '{') list('{', '}', () => { string(); ws(); word(':'); ws(); value(); });
        else if (c === '[') list('[', ']', value);
        else if (c === '"') string();
        else if (c === 't' || c === 'f' || c === 'n') word({ t: 'true', f: 'false', n: 'null' }[c]);
        else number();
    };
    try {
        ws();
        if (peek() !== '{') bad('{');
        value();
        ws();
        if (i < text.length) bad('the end');
        return 'whole';
    } catch (e) {
        if (e === CUT) return 'prefix';
        return e.message;
    }
}

// ---- requests -------------------------------------------------------------------------------

let base = ''; // http://HOST:PORT

const post = (endpoint, body) => postJson(base, endpoint, body, REQUEST_MS);

// ask(chat, fields): a completion (chat: a chat completion) with these fields; {texts, finishes,
// tokens} by choice index, or {error} (not a 200, a broken body or stream)
async function ask(chat, fields) {
    const [endpoint, body] = chat
        ? ['/v1/chat/completions', { messages: [{ role: 'user', content: 'Answer in JSON.' }], ...fields }]
        : ['/v1/completions', { prompt: 'Once upon a time', ...fields }];
    if (body.stream) body.stream_options = { include_usage: true };
    const r = await post(endpoint, body);
    if (r.status !== 200) return { error: `HTTP ${r.status}: ${r.raw.slice(0, 600)}` };
    try {
        return body.stream ? fromStream(r.raw, chat) : fromBody(JSON.parse(r.raw), chat);
    } catch (e) {
        return { error: `${e.message}: ${r.raw.slice(0, 600)}` };
    }
}

function fromBody(d, chat) {
    const out = { texts: [], finishes: [], tokens: d.usage?.completion_tokens };
    for (const c of d.choices) {
        out.texts[c.index] = chat ? c.message.content : c.text;
        out.finishes[c.index] = c.finish_reason;
    }
    return out;
}

// fromStream(raw, chat): the deltas joined by choice, each choice's last finish_reason; the
// stream must be SSE data events ending with "data: [DONE]"
function fromStream(raw, chat) {
    const events = raw.split('\n\n').filter((e) => e.trim());
    if (events.at(-1)?.trim() !== 'data: [DONE]') {
        return { error: `the stream does not end with "data: [DONE]": ...${show(raw.slice(-200))}` };
    }
    const out = { texts: [], finishes: [], tokens: undefined };
    for (const e of events.slice(0, -1)) {
        if (!e.startsWith('data: ')) return { error: `not an SSE data event: ${show(e)}` };
        const x = JSON.parse(e.slice(6));
        if (x.error) return { error: `an error in the stream: ${e}` };
        for (const c of x.choices) {
            out.texts[c.index] = (out.texts[c.index] ?? '') + ((chat ? c.delta?.content : c.text) ?? '');
            if (c.finish_reason) out.finishes[c.index] = c.finish_reason;
        }
        if (x.usage) out.tokens = x.usage.completion_tokens;
    }
    return out;
}

const jsonSchema = (schema) => ({ type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } });

// answerFailure(a, i, schema): null when choice i of answer a ended with "stop" and its text
// parses and validates against schema; else what is wrong
function answerFailure(a, i, schema) {
    if (a.error) return a.error;
    const text = a.texts[i];
    if (a.finishes[i] !== 'stop') return `finish_reason ${show(a.finishes[i])}, not "stop"; text ${show(text)}`;
    let v;
    try {
        v = JSON.parse(text);
    } catch (e) {
        return `the text does not parse (${e.message}): ${show(text)}`;
    }
    const e = validate(v, schema, schema) ?? layoutFailure(text);
    return e ? `${e}; text ${show(text)}` : null;
}

// layoutFailure(text): null when, outside its strings, JSON text has the grammar's bounds:
// whitespace between tokens at most a space, or a newline and 20 spaces or tabs; numbers at
// most 16 digits before and after the point and 2 in the exponent. Else the first that breaks them.
function layoutFailure(text) {
    const outside = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
    const space = (outside.match(/[ \t\n\r]+/g) ?? []).find((w) => !/^(?: |\n[ \t]{0,20})$/.test(w));
    if (space) return `the whitespace ${show(space)} between tokens`;
    const number = (outside.match(/-?[0-9][-+.0-9eE]*/g) ?? [])
        .find((n) => !/^-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,16})?(?:[eE][-+]?[0-9]{1,2})?$/.test(n));
    return number ? `the number ${number} out of the grammar's bounds` : null;
}

// ---- the checks -----------------------------------------------------------------------------

async function generatedSchemas() {
    const schemas = generateSchemas();
    const results = [];
    let next = 0;
    const worker = async () => {
        for (let k = next++; k < schemas.length; k = next++) {
            const chat = k % 2 === 1;
            const stream = k % 4 >= 2;
            const a = await ask(chat, { max_tokens: MAX_TOKENS, temperature: 1, seed: 1000 + k, stream,
                response_format: jsonSchema(schemas[k]) });
            results[k] = { a, chat, stream };
        }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const tokens = [];
    results.forEach(({ a, chat, stream }, k) => {
        const how = `${chat ? 'chat' : 'completions'}${stream ? ', streamed' : ''}`;
        const what = k === schemas.length - 1 ? 'a recursive $ref' : `generated schema ${k}`;
        if (a.tokens !== undefined) tokens.push(a.tokens);
        check(`json_schema, ${what} (${how}): "stop" and valid`, answerFailure(a, 0, schemas[k]),
            `${a.tokens} tokens`, `schema ${show(schemas[k], 2000)}`);
    });
    console.log(`# tokens per answer: at most ${Math.max(...tokens)}, mean ${Math.round(
        tokens.reduce((x, y) => x + y, 0) / tokens.length)} (max_tokens ${MAX_TOKENS})`);
}

// askTools(fields): a chat completion with these fields (tools); {calls, finish, content} of
// choice 0, the calls as [{id, type, name, arguments}] (a stream's deltas put together by
// index), or {error}
async function askTools(fields) {
    const body = { messages: [{ role: 'user', content: 'Call a tool.' }], ...fields };
    const r = await post('/v1/chat/completions', body);
    if (r.status !== 200) return { error: `HTTP ${r.status}: ${r.raw.slice(0, 600)}` };
    try {
        if (!body.stream) {
            const c = JSON.parse(r.raw).choices[0];
            const calls = (c.message.tool_calls ?? []).map((t) => ({ id: t.id, type: t.type, ...t.function }));
            return { calls, finish: c.finish_reason, content: c.message.content };
        }
        const events = r.raw.split('\n\n').filter((e) => e.trim());
        if (events.at(-1)?.trim() !== 'data: [DONE]') return { error: `no [DONE]: ${show(r.raw.slice(-200))}` };
        const out = { calls: [], finish: null, content: '' };
        for (const e of events.slice(0, -1)) {
            const c = JSON.parse(e.slice(6)).choices[0];
            out.content += c.delta.content ?? '';
            for (const t of c.delta.tool_calls ?? []) addToolCallDelta(out.calls, t);
            out.finish = c.finish_reason ?? out.finish;
        }
        return out;
    } catch (e) {
        return { error: `${e.message}: ${r.raw.slice(0, 600)}` };
    }
}

// callsFailure(a, tools, only, one): null when answer a is calls (finish "tool_calls", no
// content) of the tools (of only, when given; exactly one when one), each with an id, type
// "function" and arguments that parse and validate against its tool's parameters
function callsFailure(a, tools, only, one) {
    if (a.error) return a.error;
    if (a.finish !== 'tool_calls') return `finish_reason ${show(a.finish)}, not "tool_calls"`;
    if (a.content) return `content ${show(a.content)} beside the calls`;
    if (a.calls.length === 0 || (one && a.calls.length !== 1)) return `${a.calls.length} calls`;
    for (const c of a.calls) {
        const tool = tools.find((t) => t.function.name === c.name);
        if (!tool || (only && c.name !== only)) return `a call of ${show(c.name)}`;
        if (!/^call_[A-Za-z0-9]{24}$/.test(c.id) || c.type !== 'function') return `id ${show(c.id)}, type ${show(c.type)}`;
        let v;
        try {
            v = JSON.parse(c.arguments);
        } catch (e) {
            return `${c.name}'s arguments do not parse (${e.message}): ${show(c.arguments)}`;
        }
        const e = validate(v, tool.function.parameters, tool.function.parameters);
        if (e) return `${c.name}'s arguments ${show(c.arguments)}: ${e}`;
    }
    return null;
}

// Tool calls that must be made: the generated object schemas as three tools' parameters at a
// time; "required" with one call and with parallel calls, and a function named, streamed and
// not. Every call must validate against its function's parameters.
async function toolCalls() {
    const objects = generateSchemas().filter((s) => s.type === 'object' && !s.$ref).slice(0, 12);
    let parallelEnded = 0, parallelRuns = 0, parallelCalls = 0;
    const [close] = await tokensOf(']');
    for (let g = 0; g + 3 <= objects.length; g += 3) {
        const tools = objects.slice(g, g + 3).map((parameters, i) => ({
            type: 'function', function: { name: `tool_${g + i}`, description: 'a generated tool', parameters },
        }));
        const base = { tools, max_tokens: MAX_TOKENS, temperature: 1 };
        const one = await askTools({ ...base, seed: 7 * g, tool_choice: 'required', parallel_tool_calls: false });
        check(`tools ${g}-${g + 2}: "required", one call: it validates`, callsFailure(one, tools, null, true),
            one.calls?.map((c) => c.name).join(', '));
        // a list of calls goes on while the model writes ", " rather than "]" (this one likes commas:
        // "]" gets a bias of 19: most lists end within max_tokens, some after several calls)
        const several = await askTools({ ...base, seed: 7 * g + 1, tool_choice: 'required', stream: true,
            logit_bias: { [close]: 19 } });
        parallelRuns++;
        if (several.finish !== 'length') {
            parallelEnded++;
            parallelCalls += several.calls?.length ?? 0;
            check(`tools ${g}-${g + 2}: "required", parallel calls, streamed: each validates`,
                callsFailure(several, tools, null, false), `${several.calls?.length} calls`);
        }
        for (const [i, stream] of [[g, false], [g + 2, true]]) {
            const named = await askTools({ ...base, seed: 7 * g + 2 + i, stream,
                tool_choice: { type: 'function', function: { name: `tool_${i}` } } });
            check(`tools ${g}-${g + 2}: tool_${i} named${stream ? ', streamed' : ''}: one call of it, valid`,
                callsFailure(named, tools, `tool_${i}`, true), named.calls?.[0]?.arguments);
        }
    }
    check('parallel calls: most end within max_tokens, some with several calls',
        parallelEnded * 2 >= parallelRuns && parallelCalls > parallelEnded ? null
            : `${parallelEnded} of ${parallelRuns} ended, ${parallelCalls} calls`,
        `${parallelEnded} of ${parallelRuns}, ${parallelCalls} calls`);
}

// The other servers' fields: vLLM's guided_choice, guided_json and structured_outputs, and
// llama.cpp's json_schema, each kept to like response_format.
async function otherFields() {
    const choices = ['yes', 'no', 'maybe "later"', 'déjà vu'];
    const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 6 } },
        required: ['n', 's'], additionalProperties: false };
    for (const [k, [chat, stream]] of [[false, false], [true, true], [false, true], [true, false]].entries()) {
        const how = `${chat ? 'chat' : 'completions'}${stream ? ', streamed' : ''}`;
        const c = await ask(chat, { max_tokens: 40, temperature: 1, seed: 70 + k, stream, guided_choice: choices });
        check(`guided_choice (${how}): one of the choices, whole`, c.error ?? (c.finishes[0] === 'stop' &&
            choices.includes(c.texts[0]) ? null : `${show(c.texts[0])}, finish ${c.finishes[0]}`), c.texts?.[0]);
        for (const field of ['guided_json', 'json_schema']) {
            const a = await ask(chat, { max_tokens: MAX_TOKENS, temperature: 1, seed: 80 + k, stream, [field]: schema });
            check(`${field} (${how}): "stop" and valid`, answerFailure(a, 0, schema), a.texts?.[0]);
        }
        const so = await ask(chat, { max_tokens: 40, temperature: 1, seed: 90 + k, stream,
            structured_outputs: { choice: choices } });
        check(`structured_outputs.choice (${how}): one of the choices`, so.error ?? (choices.includes(so.texts[0]) ? null
            : show(so.texts[0])), so.texts?.[0]);
    }
}

// tokensOf(text): text's tokens mid-text (those after "a" in "a" + text)
async function tokensOf(text) {
    const r = await post('/tokenize', { prompt: `a${text}`, add_special_tokens: false });
    return JSON.parse(r.raw).tokens.slice(1);
}

// Strings of escapes and multi-byte characters: a logit_bias toward a backslash and toward
// the first byte of "日" (a byte token) makes the model write them. Their lengths count in code
// points, and the stream, which may cut a character between tokens, must join to the same text.
async function escapesAndUtf8() {
    const schema = {
        type: 'object',
        properties: {
            a: { type: 'string', minLength: 2, maxLength: 6 },
            b: { type: 'array', items: { type: 'string', maxLength: 4 }, minItems: 2, maxItems: 3 },
            c: { enum: STRINGS },
        },
        required: ['a', 'b', 'c'],
        additionalProperties: false,
    };
    const bias = { [(await tokensOf('\\'))[0]]: 17, [(await tokensOf('日'))[0]]: 22 };
    const texts = [];
    for (let k = 0; k < 4; k++) {
        const chat = k % 2 === 1;
        const fields = { max_tokens: MAX_TOKENS, temperature: 1, seed: 300 + k, logit_bias: bias,
            response_format: jsonSchema(schema) };
        const a = await ask(chat, fields);
        const name = `escapes and UTF-8 (${chat ? 'chat' : 'completions'}, seed ${300 + k})`;
        check(`${name}: "stop" and valid`, answerFailure(a, 0, schema), show(a.texts?.[0]));
        const streamed = await ask(chat, { ...fields, stream: true });
        check(`${name}: streamed, the same text`, streamed.error ?? (streamed.texts[0] === a.texts?.[0] ? null
            : `not streamed ${show(a.texts?.[0])}, streamed ${show(streamed.texts[0])}`));
        texts.push(a.texts?.[0] ?? '');
    }
    const escapes = texts.filter((t) => t.includes('\\')).length;
    const wide = texts.filter((t) => /[^\x00-\x7f]/.test(t)).length;
    const counts = `${escapes} of ${texts.length} with escapes, ${wide} with non-ASCII`;
    check('escapes and UTF-8: the bias made both', escapes && wide ? null : counts, counts);
}

async function jsonObject() {
    const format = { type: 'json_object' };
    for (const chat of [false, true]) {
        const a = await ask(chat, { max_tokens: MAX_TOKENS, temperature: 1, seed: 7, response_format: format });
        const shape = a.error ?? jsonPrefix(a.texts[0]);
        const finish = a.finishes?.[0];
        const good = (shape === 'prefix' && finish === 'length') || (shape === 'whole' && finish === 'stop');
        check(`json_object, unbiased (${chat ? 'chat' : 'completions'}): a JSON object, whole or cut by max_tokens`,
            good ? null : `finish ${show(finish)}, ${shape}; text ${show(a.texts?.[0])}`, `${finish}, ${a.tokens} tokens`);
    }
    const bias = { [(await tokensOf('}'))[0]]: 10, [(await tokensOf('"'))[0]]: 3 };
    const N = 10;
    let stops = 0;
    const bad = [];
    for (let k = 0; k < N; k++) {
        const chat = k % 2 === 1;
        const seed = 100 + k;
        const a = await ask(chat, { max_tokens: MAX_TOKENS, temperature: 1, seed, stream: k % 4 >= 2, logit_bias: bias,
            response_format: format });
        const shape = a.error ?? jsonPrefix(a.texts[0]);
        const finish = a.finishes?.[0];
        if (finish === 'stop') stops++;
        if (!((finish === 'stop' && shape === 'whole') || (finish === 'length' && shape === 'prefix'))) {
            bad.push(`seed ${seed} (${chat ? 'chat' : 'completions'}): finish ${show(finish)}, ${shape}; ` +
                `text ${show(a.texts?.[0])}`);
        }
    }
    const favoured = 'json_object with "}" and \'"\' favoured';
    check(`${favoured}: whole objects at "stop", cut ones at "length"`, bad.join('\n  ') || null,
        `${stops} of ${N} stopped`);
    check(`${favoured}: at least half end with "stop"`, stops * 2 >= N ? null : `${stops} of ${N}`, `${stops} of ${N}`);
}

async function gbnf() {
    const cases = [
        ['alternatives', 'root ::= ("yes" | "no") "."', /^(yes|no)\.$/],
        ['a bounded class repetition', 'root ::= [a-z]{3,6} "-" [0-9]{2}', /^[a-z]{3,6}-[0-9]{2}$/],
        ['rules and UTF-8 literals',
            'root ::= greet " " name "!"\n# a comment\ngreet ::= "hi" | "héllo" | "¡hola"\nname ::= [A-Z] [a-z]{1,5}',
            /^(hi|héllo|¡hola) [A-Z][a-z]{1,5}!$/u],
    ];
    for (const [what, grammar, re] of cases) {
        for (let k = 0; k < 4; k++) {
            const chat = k >= 2;
            const stream = k % 2 === 1;
            const a = await ask(chat, { max_tokens: 40, temperature: 1, seed: 50 + k, stream, grammar });
            const text = a.texts?.[0];
            let failure = a.error;
            if (!failure && a.finishes[0] !== 'stop') failure = `finish_reason ${show(a.finishes[0])}; text ${show(text)}`;
            if (!failure && !re.test(text)) failure = `${show(text)} does not match ${re}`;
            check(`grammar, ${what} (${chat ? 'chat' : 'completions'}${stream ? ', streamed' : ''}, seed ${50 + k})`,
                failure, show(text));
        }
    }
}

async function choicesAndSeeds() {
    const schema = {
        type: 'object',
        properties: {
            name: { type: 'string', minLength: 1, maxLength: 10 },
            n: { type: 'integer' },
            tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
        },
        required: ['name', 'n', 'tags'],
        additionalProperties: false,
    };
    const fields = { max_tokens: 200, temperature: 1, seed: 4242, n: 3, response_format: jsonSchema(schema) };
    const first = await ask(false, fields);
    const failures = [0, 1, 2].map((i) => answerFailure(first, i, schema)).filter(Boolean);
    check('n = 3: every choice ends with "stop" and validates', failures.length ? failures.join('\n  ') : null,
        show(first.texts));
    if (first.error) return;
    check('n = 3: the choices differ', new Set(first.texts).size > 1 ? null : `three times ${show(first.texts[0])}`);
    const again = await ask(false, fields);
    check('the same seed gives the same choices', again.error ?? (deepEqual(again.texts, first.texts) ? null
        : `first ${show(first.texts)}, then ${show(again.texts)}`));
    const streamed = await ask(false, { ...fields, stream: true });
    check('the same seed streamed gives the same choices', streamed.error ?? (deepEqual(streamed.texts, first.texts)
        ? null : `not streamed ${show(first.texts)}, streamed ${show(streamed.texts)}`));
}

async function badRequests() {
    const schema = (x) => ({ response_format: jsonSchema(x) });
    const SCHEMA = 'response_format.json_schema.schema';
    const cases = [ // what, on chat, the fields, the param, words the message holds
        ['a schema with pattern', true, schema({ type: 'object', properties: { id: { type: 'string', pattern: '^a' } } }),
            SCHEMA, ['pattern', 'schema.properties.id']],
        ['a $ref to a missing definition', false,
            schema({ type: 'object', properties: { p: { $ref: '#/$defs/nope' } }, $defs: {} }), SCHEMA, ['#/$defs/nope']],
        ['a schema with minimum', false, schema({ type: 'integer', minimum: 0 }), SCHEMA, ['minimum']],
        ['an unknown response_format type', false, { response_format: { type: 'xml' } }, 'response_format.type', []],
        ['json_schema without its json_schema', true, { response_format: { type: 'json_schema' } },
            'response_format.json_schema', []],
        ['GBNF cut inside a class', false, { grammar: 'root ::= [a-' }, 'grammar', ['grammar: line 1, column']],
        ['GBNF with an undefined rule', true, { grammar: 'root ::= "a" x\nx ::= y' }, 'grammar', ['line 2', "'y'"]],
        ['a grammar beside json_object', false, { grammar: 'root ::= "a"', response_format: { type: 'json_object' } },
            'grammar', []],
    ];
    for (const [what, chat, fields, param, words] of cases) {
        const prompt = chat ? { messages: [{ role: 'user', content: 'Hi' }] } : { prompt: 'Hi' };
        const r = await post(chat ? '/v1/chat/completions' : '/v1/completions', { ...prompt, max_tokens: 8, ...fields });
        const e = errorFailure(r, param, words);
        check(`400 for ${what} (param ${param})`, e.failure, e.message);
    }
}

// errorFailure(r, param, words): {failure: null, message} when r is a 400 in OpenAI's error
// shape with this param and a message holding every one of words; else {failure}, what is wrong
function errorFailure(r, param, words) {
    const got = `HTTP ${r.status} ${r.raw.slice(0, 400)}`;
    if (r.status !== 400) return { failure: got };
    let e;
    try {
        e = JSON.parse(r.raw).error;
    } catch {
        return { failure: `not JSON: ${got}` };
    }
    if (!isObject(e) || typeof e.message !== 'string' || e.type !== 'invalid_request_error' || !('code' in e)) {
        return { failure: `not OpenAI's error shape: ${got}` };
    }
    if (e.param !== param) return { failure: `param ${show(e.param)}: ${got}` };
    const missing = words.filter((w) => !e.message.includes(w));
    return { failure: missing.length ? `the message lacks ${show(missing)}: ${got}` : null, message: e.message };
}

async function alive() {
    let r;
    try {
        r = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) });
    } catch (e) {
        return fail('/health answers 200 after everything', `no answer: ${e.message}`);
    }
    check('/health answers 200 after everything', r.status === 200 ? null : `HTTP ${r.status}`);
}

// ---- the server -----------------------------------------------------------------------------

let server = null;

async function main() {
    server = new Server(['--threads', '1', '--memory', '256MiB', '--max-model-len', '512', '--no-access-log']);
    if (!(await server.start())) return;
    base = server.base;
    await server.checkThenStop([generatedSchemas, escapesAndUtf8, jsonObject, gbnf, choicesAndSeeds, toolCalls,
        otherFields, badRequests, alive]);
}

run(main, { servers: () => [server] });
