// The gate's limits that issue 32 found wanting, against `snug serve` on the bundled
// models/stories260K (--memory 256MiB, as the README runs it):
//   - slow uploads: 40 connections that declare Content-Length 1000000, send 17 KB, then a
//     byte a second, must not lock out completions (uploads have their own pool, apart from
//     the requests being answered; those past it get 503 too_many_uploads at once), and a
//     body slower than --min-upload-rate after --upload-grace-seconds gets 408;
//   - the API key: every endpoint but GET /health and the page at / answers 401 without it
//     and 200 with it; --metrics-no-auth opens /metrics alone;
//   - X-Content-Type-Options: nosniff on every reply (JSON, a stream, the page, 404, 405, a
//     preflight, the gate's own errors);
//   - a 700,030-byte body (under the 1 MiB --max-body-bytes) parses on an idle server: the
//     request's own 400, not 503; a body whose parse could never fit is a 413.
// Usage: node tests/server/gate_limits.mjs BUILD_DIR. Prints "ok - ..." / "FAIL - ..." lines
// and "N passed, M failed" (see tests/run); exit status 1 if any failed. Bounded by a watchdog
// (60 s); only node's built-in modules; loopback only.
import net from 'node:net';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = path.resolve(process.cwd(), process.argv[2] ?? 'build');
const KEY = 'gate-key';
const SLOW = 40; // slow uploaders: more than --max-connections 32
const UPLOADS = 8; // --max-uploads' default
const RATE = 8192; // --min-upload-rate here
const GRACE_S = 1; // --upload-grace-seconds here

let passed = 0;
let failed = 0;
const ok = (name, got) => { console.log(`ok - ${name}${got ? ` (${got})` : ''}`); passed++; };
const fail = (name, expected, got) => {
    console.log(`FAIL - ${name}\n  expected: ${expected}\n  got: ${got}`);
    failed++;
};
const check = (name, good, expected, got) => (good ? ok(name, got) : fail(name, expected, got));

const servers = new Set();
const sockets = new Set();

// start(args): a server on a free port; resolves {url, port, proc, err()} or null
async function start(args) {
    const proc = spawn(path.join(build, 'snug'), ['serve', '--port', '0', '--threads', '1', '--memory', '256MiB',
        '--max-model-len', '256', '--no-access-log', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    servers.add(proc);
    let out = '';
    let err = '';
    proc.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
    const url = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), 30_000);
        proc.stdout.on('data', (d) => {
            out += d;
            const m = /^serving .* on (http:\/\/[0-9.]+:(\d+))/m.exec(out);
            if (m) { clearTimeout(timer); resolve(m[1]); }
        });
        proc.once('exit', () => { clearTimeout(timer); resolve(null); });
    });
    if (!url) {
        fail(`the server started with ${args.join(' ')}`, 'a serving line', `${out.slice(-300)} ${err.slice(-300)}`);
        return null;
    }
    return { url, port: Number(new URL(url).port), proc, err: () => err };
}

async function stop(s) {
    if (!s || s.proc.exitCode !== null) return;
    const exited = new Promise((r) => s.proc.once('exit', r));
    s.proc.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000)]);
    s.proc.kill('SIGKILL');
    servers.delete(s.proc);
}

// req(s, path, opts): fetch with a 10 s limit; {status, headers, text, ms}
async function req(s, p, opts = {}) {
    const t0 = performance.now();
    try {
        const r = await fetch(s.url + p, { ...opts, signal: AbortSignal.timeout(10_000) });
        const text = await r.text();
        return { status: r.status, headers: r.headers, text, ms: Math.round(performance.now() - t0) };
    } catch (e) {
        return { status: 0, headers: new Headers(), text: String(e.message), ms: Math.round(performance.now() - t0) };
    }
}

const completion = (s, extra = {}) => req(s, '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...extra },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
});

// raw(port, bytes): a socket that sent bytes; .data() is what came back, .closed whether it ended
function raw(port, bytes) {
    return new Promise((resolve, reject) => {
        const sock = net.connect({ host: '127.0.0.1', port });
        sockets.add(sock);
        const c = { sock, buf: Buffer.alloc(0), closed: false, at: null };
        sock.on('data', (d) => { c.buf = Buffer.concat([c.buf, d]); c.at ??= performance.now(); });
        sock.on('close', () => { c.closed = true; sockets.delete(sock); });
        sock.on('error', () => {});
        sock.once('connect', () => { sock.write(bytes); resolve(c); });
        sock.once('error', reject);
    });
}
const statusOf = (c) => /^HTTP\/1\.1 (\d{3})/.exec(c.buf.toString('latin1'))?.[1] ?? null;
const codeOf = (c) => /"code":"([a-z_]+)"/.exec(c.buf.toString('latin1'))?.[1] ?? null;
const uploadHead = (port) => `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
    'Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n';

// ---- slow uploads ----------------------------------------------------------------------------

async function slowUploads() {
    const s = await start(['--min-upload-rate', String(RATE), '--upload-grace-seconds', String(GRACE_S)]);
    if (!s) return;
    const conns = [];
    const t0 = performance.now();
    for (let i = 0; i < SLOW; i++) {
        const c = await raw(s.port, uploadHead(s.port) + `{"prompt": "${'a'.repeat(17 * 1024)}`);
        conns.push(c);
    }
    const dribble = setInterval(() => { for (const c of conns) if (!c.closed) c.sock.write('a'); }, 1000);
    try {
        await sleep(300);
        // a well-behaved completion gets through while they are connected
        const r = await completion(s);
        check(`a completion gets through beside ${SLOW} slow uploads (Content-Length 1000000, 17 KB, then a byte a second)`,
            r.status === 200 && r.ms < 3000, '200 within 3 s', `HTTP ${r.status} in ${r.ms} ms: ${r.text.slice(0, 120)}`);
        const probe = await req(s, '/health');
        check('/health answers beside them', probe.status === 200 && probe.ms < 1000, '200 within 1 s',
            `HTTP ${probe.status} in ${probe.ms} ms`);
        // past the pool: 503 too_many_uploads at once
        const refused = conns.filter((c) => statusOf(c) === '503' && codeOf(c) === 'too_many_uploads').length;
        const open = conns.filter((c) => !c.buf.length).length;
        check(`of ${SLOW} uploads, ${UPLOADS} are taken and the rest refused at once (503 too_many_uploads)`,
            refused === SLOW - UPLOADS && open === UPLOADS, `${SLOW - UPLOADS} refused, ${UPLOADS} unanswered`,
            `${refused} refused, ${open} unanswered`);
        // the ones taken are too slow: 408 once their 17 KB no longer cover the rate after the grace
        const due = GRACE_S * 1000 + (17 * 1024 / RATE) * 1000;
        await Promise.all(conns.map(async (c) => {
            for (let k = 0; k < 60 && !c.buf.length; k++) await sleep(100);
        }));
        const timed = conns.filter((c) => statusOf(c) === '408' && codeOf(c) === 'request_timeout');
        const times = timed.map((c) => Math.round(c.at - t0));
        const worst = Math.max(...times);
        check(`each upload slower than --min-upload-rate ${RATE} after --upload-grace-seconds ${GRACE_S} gets 408 request_timeout`,
            timed.length === UPLOADS && worst < due + 2500 && Math.min(...times) > due - 1500,
            `${UPLOADS} answered 408 between ${Math.round(due - 1500)} and ${Math.round(due + 2500)} ms`,
            `${timed.length} answered 408, at ${times.join(', ')} ms; ${conns.filter((c) => !c.buf.length).length} unanswered`);
        const body = timed[0]?.buf.toString('latin1') ?? '';
        check('the 408 is in the OpenAI error shape and says how slow the body came',
            /\{"error":\{"message":"the request body came at \d+ bytes\/s, slower than the 8192 bytes\/s/.test(body) &&
            /"type":"invalid_request_error"/.test(body), 'OpenAI error JSON naming the rate', body.slice(-220));
        // a large body at a decent rate still goes through: 20 KB in one write
        const big = `{${' '.repeat(20_000)}"prompt": "Once upon a time", "max_tokens": 2}`;
        const rb = await req(s, '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: big });
        check('a 20 KB body sent at once is served (an upload, whole at once)', rb.status === 200, '200',
            `HTTP ${rb.status}: ${rb.text.slice(0, 120)}`);
    } finally {
        clearInterval(dribble);
        for (const c of conns) c.sock.destroy();
    }
    await stop(s);
}

// ---- the API key, nosniff ----------------------------------------------------------------------

async function apiKey() {
    const s = await start(['--api-key', KEY, '--allowed-origins', '*']);
    if (!s) return;
    const auth = { Authorization: `Bearer ${KEY}` };
    const json = { 'Content-Type': 'application/json' };
    const endpoints = [
        ['GET', '/v1/models'], ['GET', '/v1/models/stories260K'], ['GET', '/metrics'], ['GET', '/version'],
        ['GET', '/v1/memory'], ['POST', '/tokenize', '{"prompt": "Once"}'], ['POST', '/detokenize', '{"tokens": [1, 2]}'],
        ['POST', '/v1/completions', '{"prompt": "Once", "max_tokens": 1}'],
        ['POST', '/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}'],
        ['POST', '/reset_prefix_cache', ''],
    ];
    const wrong = [];
    for (const [method, p, body] of endpoints) {
        const opts = (h) => ({ method, headers: { ...json, ...h }, body });
        const none = await req(s, p, opts({}));
        const bad = await req(s, p, opts({ Authorization: `Bearer ${KEY}x` }));
        const short = await req(s, p, opts({ Authorization: 'Bearer gate' }));
        const good = await req(s, p, opts(auth));
        if (none.status !== 401 || bad.status !== 401 || short.status !== 401 || !/"code":"invalid_api_key"/.test(none.text) ||
            good.status !== 200)
            wrong.push(`${method} ${p}: ${none.status}/${bad.status}/${short.status} without, ${good.status} with`);
    }
    check(`with --api-key, ${endpoints.length} endpoints answer 401 invalid_api_key without the key (none, longer, shorter) and 200 with it`,
        wrong.length === 0, '401, 401, 401, then 200 for each', wrong.join('; ') || 'all');
    // /timeline.svg: behind the key too (404 here: not recorded), not 401 with it
    const tl = await req(s, '/timeline.svg');
    const tlk = await req(s, '/timeline.svg', { headers: auth });
    check('/timeline.svg needs the key (401 without; with it, 404 when not recorded)', tl.status === 401 && tlk.status === 404,
        '401, then 404', `${tl.status}, then ${tlk.status}`);
    const health = await req(s, '/health');
    const page = await req(s, '/');
    check('GET /health and the page at / answer without the key', health.status === 200 && page.status === 200 &&
        /<html/i.test(page.text), '200 and 200', `${health.status} and ${page.status}`);

    // nosniff on every reply: JSON, 401, 404, 405, a preflight, the page, a stream, the gate's own
    const replies = {
        'JSON 200': await req(s, '/v1/models', { headers: auth }),
        '401': await req(s, '/v1/models'),
        '404': await req(s, '/nope', { headers: auth }),
        '405': await req(s, '/v1/completions', { headers: auth }),
        'preflight 204': await req(s, '/v1/completions', { method: 'OPTIONS', headers: { Origin: 'http://a.example' } }),
        'the page': page,
        '/health': health,
        'metrics text': await req(s, '/metrics', { headers: auth }),
        'a stream': await req(s, '/v1/completions', { method: 'POST', headers: { ...json, ...auth },
            body: '{"prompt": "Once", "max_tokens": 2, "stream": true}' }),
    };
    const gate = await raw(s.port, 'GET /health HTTP/1.1\r\nHost: x\r\nBad Line\r\n\r\n');
    for (let k = 0; k < 30 && !gate.closed; k++) await sleep(100);
    const lacking = Object.entries(replies).filter(([, r]) => r.headers.get('x-content-type-options') !== 'nosniff')
        .map(([n, r]) => `${n} (HTTP ${r.status})`);
    const gateHas = /\r\nX-Content-Type-Options: nosniff\r\n/i.test(gate.buf.toString('latin1'));
    if (!gateHas) lacking.push(`the gate's own 400: ${gate.buf.toString('latin1').slice(0, 200)}`);
    check('every reply carries X-Content-Type-Options: nosniff', lacking.length === 0 && replies['a stream'].status === 200,
        `nosniff on ${Object.keys(replies).join(', ')} and the gate's own errors`, lacking.join('; ') || 'all');
    await stop(s);

    const m = await start(['--api-key', KEY, '--metrics-no-auth']);
    if (!m) return;
    const open = await req(m, '/metrics');
    const still = await req(m, '/version');
    const models = await req(m, '/v1/models');
    check('--metrics-no-auth: /metrics answers without the key, /version and /v1/models still need it',
        open.status === 200 && /snug_http_requests_total/.test(open.text) && still.status === 401 && models.status === 401,
        '200, 401, 401', `${open.status}, ${still.status}, ${models.status}`);
    await stop(m);
}

// ---- request memory ------------------------------------------------------------------------------

async function bigBodies() {
    const s = await start([]);
    if (!s) return;
    const post = (p, body) => req(s, p, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    // a long prompt: 700,030 bytes, its own 400 (longer than the model's 256 tokens)
    let body = JSON.stringify({ prompt: 'Once upon a time, '.repeat(38_800), max_tokens: 1 });
    body = body.slice(0, -1) + ' '.repeat(700_030 - body.length) + '}';
    const a = await post('/v1/completions', body);
    check('a 700,030-byte prompt on an idle server (--memory 256MiB) is parsed: its own 400 context_length_exceeded, not 503',
        Buffer.byteLength(body) === 700_030 && a.status === 400 && /"code":"context_length_exceeded"/.test(a.text),
        '400 context_length_exceeded', `HTTP ${a.status}: ${a.text.slice(0, 200)}`);
    // chat messages of 700,030 bytes: its own 400 for the content (a field no one takes)
    let chat = JSON.stringify({ messages: Array(400).fill({ role: 'user', content: 'Once upon a time '.repeat(100) }),
        max_tokens: 1, nope: '' });
    chat = chat.slice(0, -2) + 'a'.repeat(700_030 - chat.length) + '"}';
    const b = await post('/v1/chat/completions', chat);
    check('700,030 bytes of chat messages on an idle server are parsed: the request\'s own 400 (an unknown field), not 503',
        Buffer.byteLength(chat) === 700_030 && b.status === 400 && /"param":"nope"/.test(b.text),
        '400 naming nope', `HTTP ${b.status}: ${b.text.slice(0, 200)}`);
    // 350,000 small integers: a parse that could never fit in the request memory is a 413 first
    const ints = `{"prompt": [${Array(350_000).fill('0').join(',')}], "max_tokens": 1}`;
    const c = await post('/v1/completions', ints);
    check('a body whose parse could never fit the memory for requests (350,000 one-digit ids) is 413, not 503',
        c.status === 413 && /"code":"body_too_large"/.test(c.text) && /memory for requests/.test(c.text),
        '413 body_too_large naming the memory', `HTTP ${c.status}: ${c.text.slice(0, 200)}`);
    const after = await completion(s);
    check('a completion after them', after.status === 200, '200', `HTTP ${after.status}`);
    check('no 503 overloaded was logged', !/overloaded/.test(s.err()), 'nothing', s.err().slice(-300));
    await stop(s);

    // --server-memory too small for one body of --max-body-bytes: refused at start, naming both
    const r = spawn(path.join(build, 'snug'), ['serve', '--port', '0', '--memory', '256MiB', '--server-memory', '8MiB'],
        { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    r.stderr.on('data', (d) => { err += d; });
    const code = await new Promise((resolve) => r.once('exit', resolve));
    check('--server-memory 8MiB with --max-body-bytes 1 MiB is refused at start, naming both figures',
        code !== 0 && /--server-memory 8388608 bytes cannot parse one body of --max-body-bytes 1048576/.test(err),
        'exit != 0 and the message', `exit ${code}: ${err.trim().slice(0, 300)}`);
}

function finish(code) {
    for (const s of sockets) s.destroy();
    for (const p of servers) p.kill('SIGKILL');
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(code ?? (failed ? 1 : 0));
}
setTimeout(() => { fail('the file finishes within 60 s', 'the end', 'still running'); finish(1); }, 60_000).unref();

(async () => {
    await slowUploads();
    await apiKey();
    await bigBodies();
})().then(() => finish(), (e) => { fail('the tests ran to their end', 'no exception', e.stack); finish(1); });
