// Hostile clients against `snug serve` (issue 19): what a client sees when others, or it,
// send broken bytes, stall, hold sockets open without a word, trickle a head or a body, or
// half-close; the server must answer each broken request with its own JSON error and keep
// answering /health (within 1 s) and completions beside every attack.
//
// One server on the bundled models/stories260K, on a free port of 127.0.0.1:
//   --max-connections 8 (a pool of 4*8+64 = 96 open connections), --header-timeout-seconds 3,
//   --keep-alive-seconds 2, --timeout-seconds 5 (the body deadline), --no-access-log
// then the cases below, then SIGTERM: the server must exit 0 within 10 s.
//
// Usage: node tests/server/hostile.mjs BUILD_DIR (default build), from anywhere. Prints one
// "ok - ..." / "FAIL - ..." line per case (a failure's expected and got lines indented under
// it) and a final "N passed, M failed" (see tests/run); exit status 1 if any failed. The
// whole file is bounded (a watchdog fails it at 85 s), talks to loopback only, opens at most
// about 450 sockets at once, and destroys every socket and the server however it ends.
// Only node's built-in modules.
import net from 'node:net';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = path.resolve(process.cwd(), process.argv[2] ?? 'build');

// the server's limits as started here, and what the SPEC derives from them
const MAX_CONNECTIONS = 8;
const POOL = 4 * MAX_CONNECTIONS + 64; // open connections the server holds at most
const HEADER_TIMEOUT_S = 3;
const KEEP_ALIVE_S = 2;
const BODY_TIMEOUT_S = 5; // --timeout-seconds (not keep-alive + slack: the two deadlines are told apart)
const MAX_BODY = 1 << 20; // --max-body-bytes' default
const SLACK_MS = 2000; // a deadline's answer may come this late (loaded machine)
const PROBE_MS = 1000; // /health and /metrics answer within this, at all times
const STREAM_MS = 6000; // a completion of 30 tokens (milliseconds on this model) ends within this
const WATCHDOG_MS = 85_000;
const SOCKETS_MAX = 450; // the most this file holds open at once (the 400 idle ones and probes)

const started = performance.now();
let passed = 0;
let failed = 0;
const ok = (name, got) => {
    console.log(`ok - ${name}${got ? ` (${got})` : ''}`);
    passed++;
};
const fail = (name, expected, got, ...more) => {
    console.log(`FAIL - ${name}`);
    console.log(`  expected: ${expected}`);
    console.log(`  got: ${got}`);
    for (const l of more) if (l) console.log(`  ${l}`);
    failed++;
};
// check(name, failure or null, expected, got): one line for a case
const check = (name, failure, expected, got) => (failure ? fail(name, expected, failure) : ok(name, got));
const ms = (t0) => Math.round(performance.now() - t0);
const show = (b, n = 200) => JSON.stringify(Buffer.from(b).toString('latin1').slice(0, n));

// ---- sockets ------------------------------------------------------------------------------

const sockets = new Set(); // every socket this file opened and has not yet destroyed
let port = 0;

// A raw connection: the bytes that came back, whether and when the server closed it (FIN or
// reset), and readResponse() parsing HTTP/1.x answers out of them one after another.
class Conn {
    constructor(sock) {
        this.sock = sock;
        this.buf = Buffer.alloc(0); // received, not yet parsed
        this.received = 0; // bytes received in all
        this.firstDataAt = null;
        this.closedAt = null; // performance.now() of the server's FIN or reset, or our destroy
        this.error = null; // a socket error (ECONNRESET, EPIPE...)
        this.waiters = [];
        sock.on('data', (d) => {
            this.buf = Buffer.concat([this.buf, d]);
            this.received += d.length;
            this.firstDataAt ??= performance.now();
            this.wake();
        });
        const closed = () => {
            this.closedAt ??= performance.now();
            this.wake();
        };
        sock.on('end', closed);
        sock.on('close', closed);
        sock.on('error', (e) => {
            this.error ??= e.code ?? e.message;
            closed();
        });
    }

    // open(): a connection to the server; rejects after ms without one
    static open(timeoutMs = 3000) {
        return new Promise((resolve, reject) => {
            const sock = net.connect({ host: '127.0.0.1', port });
            sockets.add(sock);
            sock.on('close', () => sockets.delete(sock));
            sock.setNoDelay(true);
            const c = new Conn(sock);
            const timer = setTimeout(() => {
                sock.destroy();
                reject(new Error(`no connection within ${timeoutMs} ms`));
            }, timeoutMs);
            sock.once('connect', () => {
                clearTimeout(timer);
                resolve(c);
            });
            sock.once('error', (e) => {
                clearTimeout(timer);
                reject(new Error(`connect: ${e.code ?? e.message}`));
            });
        });
    }

    get closed() { return this.closedAt !== null; }

    wake() {
        const w = this.waiters;
        this.waiters = [];
        for (const f of w) f();
    }

    // more(deadline): resolves at the next data or close, or at the deadline
    more(deadline) {
        return new Promise((resolve) => {
            const t = setTimeout(resolve, Math.max(0, deadline - performance.now()));
            this.waiters.push(() => {
                clearTimeout(t);
                resolve();
            });
        });
    }

    // write(bytes): sends them; a write error (the server closed) is recorded, not thrown
    write(bytes) {
        if (this.sock.destroyed || this.sock.writableEnded) return Promise.resolve(false);
        return new Promise((resolve) => {
            this.sock.write(bytes, (e) => {
                if (e) this.error ??= e.code ?? e.message;
                resolve(!e);
            });
        });
    }

    halfClose() { if (!this.sock.destroyed) this.sock.end(); }

    destroy() {
        this.sock.destroy();
        this.closedAt ??= performance.now();
    }

    // waitClosed(ms): true once the server has closed the connection (within ms)
    async waitClosed(timeoutMs) {
        const deadline = performance.now() + timeoutMs;
        while (!this.closed && performance.now() < deadline) await this.more(deadline);
        return this.closed;
    }

    // readResponse(ms): the next answer, {status, reason, headers (lower-case names, repeats
    // joined by ", "), body (a Buffer), at (when it was complete)}; throws when none is complete
    // within ms or the connection ends first. Skips 1xx answers.
    async readResponse(timeoutMs) {
        const deadline = performance.now() + timeoutMs;
        for (;;) {
            const r = this.parse();
            if (r && r.status >= 200) return { ...r, at: performance.now() };
            if (r) continue; // a 1xx: the next one
            if (this.closed) {
                throw new Error(this.buf.length
                    ? `closed in the middle of an answer: ${show(this.buf)}`
                    : `closed with no answer${this.error ? ` (${this.error})` : ''}`);
            }
            if (performance.now() >= deadline) {
                throw new Error(`no complete answer within ${timeoutMs} ms` +
                    (this.buf.length ? `; have ${show(this.buf)}` : ''));
            }
            await this.more(deadline);
        }
    }

    // parse(): one complete answer taken off the buffer, or null (and the buffer kept)
    parse() {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) return null;
        const lines = this.buf.subarray(0, end).toString('latin1').split('\r\n');
        const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(lines[0]);
        if (!m) throw new Error(`not an HTTP status line: ${show(lines[0])}`);
        const headers = {};
        for (const l of lines.slice(1)) {
            const i = l.indexOf(':');
            if (i <= 0) throw new Error(`a bad header line in the answer: ${show(l)}`);
            const k = l.slice(0, i).trim().toLowerCase();
            const v = l.slice(i + 1).trim();
            headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
        }
        const status = Number(m[2]);
        let rest = this.buf.subarray(end + 4);
        let body;
        if (status < 200 || status === 204 || status === 304) {
            body = Buffer.alloc(0);
        } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
            const parts = [];
            for (;;) {
                const le = rest.indexOf('\r\n');
                if (le < 0) return null;
                const size = parseInt(rest.subarray(0, le).toString('latin1').split(';')[0], 16);
                if (Number.isNaN(size)) throw new Error(`a bad chunk size in the answer: ${show(rest)}`);
                if (size === 0) {
                    const te = rest.indexOf('\r\n\r\n', le); // no trailers expected: CRLF CRLF
                    if (te < 0) return null;
                    rest = rest.subarray(te + 4);
                    break;
                }
                if (rest.length < le + 2 + size + 2) return null;
                parts.push(rest.subarray(le + 2, le + 2 + size));
                rest = rest.subarray(le + 2 + size + 2);
            }
            body = Buffer.concat(parts);
        } else if ('content-length' in headers) {
            const n = Number(headers['content-length']);
            if (rest.length < n) return null;
            body = rest.subarray(0, n);
            rest = rest.subarray(n);
        } else {
            if (!this.closed) return null; // delimited by the close
            body = rest;
            rest = Buffer.alloc(0);
        }
        this.buf = rest;
        return { status, reason: m[3] ?? '', version: m[1], headers, body };
    }
}

const destroyAll = () => { for (const s of sockets) s.destroy(); };

// rawRequest(bytes, {halfClose, timeoutMs, closeWaitMs}): a fresh connection, the bytes
// written (then the write side shut when halfClose), one answer read, all within timeoutMs.
// Returns {status (0 when none), headers, body (a string), closed (the server closed the
// connection within closeWaitMs of the answer), error (why there is no answer), ms}; never
// throws.
async function rawRequest(bytes, { halfClose = false, timeoutMs = 3000, closeWaitMs = 1000 } = {}) {
    const t0 = performance.now();
    let c;
    try {
        c = await Conn.open(timeoutMs);
        await c.write(bytes);
        if (halfClose) c.halfClose();
        const r = await c.readResponse(Math.max(1, timeoutMs - ms(t0)));
        const closed = await c.waitClosed(closeWaitMs);
        return { ...r, body: r.body.toString('utf8'), closed, error: null, ms: ms(t0) };
    } catch (e) {
        return { status: 0, headers: {}, body: '', closed: c?.closed ?? false, error: e.message, ms: ms(t0) };
    } finally {
        c?.destroy();
    }
}

const HOST = 'Host: 127.0.0.1\r\n';
const get = (p, extra = '') => `GET ${p} HTTP/1.1\r\n${HOST}${extra}\r\n`;
const post = (p, body, extra = '') =>
    `POST ${p} HTTP/1.1\r\n${HOST}Content-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

// probeHealth(path): GET path on a fresh connection; {ok: 200 within PROBE_MS, ms, got}
async function probeHealth(p = '/health') {
    const r = await rawRequest(get(p, 'Connection: close\r\n'), { timeoutMs: PROBE_MS, closeWaitMs: 0 });
    const good = r.status === 200 && r.ms <= PROBE_MS;
    return { ok: good, ms: r.ms, got: `${p}: ${r.status ? `HTTP ${r.status}` : r.error} in ${r.ms} ms` };
}

// probeFor(ms): /health and /metrics by turns on fresh connections, one every 100 ms for
// about ms; resolves to a failure message or null, and what was seen
async function probeFor(durationMs) {
    const end = performance.now() + durationMs;
    const bad = [];
    let n = 0;
    let worst = 0;
    while (performance.now() < end) {
        const t = performance.now();
        const p = await probeHealth(n % 2 ? '/metrics' : '/health');
        n++;
        worst = Math.max(worst, p.ms);
        if (!p.ok) bad.push(p.got);
        await sleep(Math.max(0, 100 - (performance.now() - t)));
    }
    const seen = `${n} probes, the slowest ${worst} ms`;
    return { failure: bad.length ? `${bad.length} of ${seen}; first: ${bad.slice(0, 3).join('; ')}` : null, seen };
}

// streamCompletion(): a streaming completion of 30 tokens; a failure message or null, and
// what was seen
async function streamCompletion({ maxTokens = 30, timeoutMs = STREAM_MS } = {}) {
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: maxTokens, stream: true });
    const r = await rawRequest(post('/v1/completions', body, 'Connection: close\r\n'), { timeoutMs, closeWaitMs: 0 });
    const events = r.body.split('\n').filter((l) => l.startsWith('data: '));
    const seen = `HTTP ${r.status || r.error}, ${events.length} events in ${r.ms} ms`;
    const failure = r.status !== 200 ? (r.status ? `HTTP ${r.status}: ${r.body.slice(0, 300)}` : r.error)
        : events.at(-1) !== 'data: [DONE]' ? `the last event is not [DONE]: ${show(events.at(-1) ?? r.body)}`
        : events.length < 2 ? `only ${events.length} events` : null;
    return { failure, seen };
}

// errorShape(r, status, code, {close}): null when r is the JSON error as the SPEC has it;
// else what is wrong. code undefined: not checked; close: Connection: close and closed.
function errorShape(r, status, code, { close = true } = {}) {
    if (!r.status) return r.error;
    const got = `HTTP ${r.status} ${show(r.body, 300)}`;
    if (Array.isArray(status) ? !status.includes(r.status) : r.status !== status) return got;
    if (!/^application\/json/.test(r.headers['content-type'] ?? '')) {
        return `Content-Type ${JSON.stringify(r.headers['content-type'])}; ${got}`;
    }
    let e;
    try {
        e = JSON.parse(r.body).error;
    } catch {
        return `a body that is not JSON: ${got}`;
    }
    if (typeof e !== 'object' || e === null || typeof e.message !== 'string' || !e.message ||
        typeof e.type !== 'string' || !('param' in e) || (e.param !== null && typeof e.param !== 'string') ||
        !('code' in e) || (e.code !== null && typeof e.code !== 'string')) {
        return `not OpenAI's error shape: ${got}`;
    }
    if (code !== undefined && e.code !== code) return `code ${JSON.stringify(e.code)}: ${got}`;
    if (close && !/\bclose\b/i.test(r.headers.connection ?? '')) {
        return `no Connection: close (Connection ${JSON.stringify(r.headers.connection)}): ${got}`;
    }
    if (close && !r.closed) return `the connection still open 1 s after the answer: ${got}`;
    return null;
}

// ---- the server ---------------------------------------------------------------------------

let server = null; // the child process while it runs
let serverExit = null; // a promise of {code, signal}
let serverErr = ''; // the tail of its stderr
let serverErrHead = ''; // and its start (a usage error's first line)

// stderrLines(n): the server's first stderr line and its last n lines, to show under a failure
function stderrLines(n) {
    const head = serverErrHead.split('\n')[0];
    const tail = serverErr.split('\n').filter(Boolean).slice(-n);
    return tail.includes(head) || !head ? tail : [head, '...', ...tail];
}

async function startServer() {
    const args = ['serve', '--port', '0', '--threads', '1', '--memory', '256MiB', '--max-model-len', '256',
        '--max-connections', String(MAX_CONNECTIONS), '--header-timeout-seconds', String(HEADER_TIMEOUT_S),
        '--keep-alive-seconds', String(KEEP_ALIVE_S), '--timeout-seconds', String(BODY_TIMEOUT_S),
        '--no-access-log'];
    const bin = path.join(build, 'snug');
    server = spawn(bin, args, {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
    });
    serverExit = new Promise((resolve) => server.once('exit', (code, signal) => {
        server = null;
        resolve({ code, signal });
    }));
    server.once('error', (e) => { serverErr += `cannot run ${bin}: ${e.message}\n`; });
    server.stderr.setEncoding('utf8');
    server.stderr.on('data', (d) => {
        if (serverErrHead.length < 400) serverErrHead += d;
        serverErr = (serverErr + d).slice(-4000);
    });
    server.stdout.setEncoding('utf8');
    let out = '';
    const url = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), 30_000);
        server.stdout.on('data', (d) => {
            out = (out + d).slice(-8000);
            const m = /^serving .* on http:\/\/([0-9.]+):(\d+)/m.exec(out);
            if (m) {
                clearTimeout(timer);
                port = Number(m[2]);
                resolve(`http://${m[1]}:${m[2]}`);
            }
        });
        serverExit.then(() => {
            clearTimeout(timer);
            resolve(null);
        });
    });
    if (url) ok('the server started', url);
    else fail('the server started', "a 'serving ... on http://HOST:PORT' line within 30 s", 'none',
        ...out.split('\n').slice(-5), ...stderrLines(5));
    return url !== null;
}

async function stopServer() {
    if (!server) {
        const x = await serverExit;
        return fail('the server exits 0 on SIGTERM within 10 s', 'running until SIGTERM',
            `it had exited (status ${x.code}, signal ${x.signal})`, ...stderrLines(5));
    }
    const t0 = performance.now();
    server.kill('SIGTERM');
    const x = await Promise.race([serverExit, sleep(10_000).then(() => null)]);
    if (!x) {
        server?.kill('SIGKILL');
        await serverExit;
        return fail('the server exits 0 on SIGTERM within 10 s', 'exit 0', 'still running after 10 s; killed',
            ...stderrLines(3));
    }
    check('the server exits 0 on SIGTERM within 10 s', x.code === 0 ? null : `status ${x.code}, signal ${x.signal}`,
        'exit 0', `in ${ms(t0)} ms`);
}

// recovered(name): after an attack, with its sockets gone, /health answers again within 5 s
async function recovered(name) {
    destroyAll();
    const t0 = performance.now();
    let p;
    do {
        p = await probeHealth();
        if (p.ok) return;
        await sleep(100);
    } while (performance.now() - t0 < 5000);
    fail(`/health answers again after ${name}`, '200 within 5 s', p.got);
}

// ---- the cases ----------------------------------------------------------------------------

const completion = (extra = {}) => JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, ...extra });
const clPost = (cl, body = '{"a":') => `POST /v1/completions HTTP/1.1\r\n${HOST}Content-Type: application/json\r\n` +
    `Content-Length: ${cl}\r\n\r\n${body}`;
const chunkedPost = (chunks, te = 'chunked') => `POST /v1/completions HTTP/1.1\r\n${HOST}` +
    `Content-Type: application/json\r\nTransfer-Encoding: ${te}\r\n\r\n${chunks}`;
const fields = (n) => Array.from({ length: n }, (_, i) => `X-Field-${i}: ${i}\r\n`).join('');
// a TLS ClientHello's first bytes: a client speaking TLS to the HTTP port
const tlsHello = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]),
    Buffer.alloc(32, 0xab), Buffer.from('\r\n\r\n')]);

// [name, request bytes, status, code]: each on a fresh connection; the answer must be the JSON
// error with Connection: close, and the connection closed
const BROKEN = [
    ['a request line that is one word', 'GARBAGE\r\n\r\n', 400, 'malformed_request'],
    ['garbage bytes (a TLS ClientHello)', tlsHello, 400, 'malformed_request'],
    ['a request line without a version', `GET /health\r\n${HOST}\r\n`, 400, 'malformed_request'],
    ['a request line with a fourth word', `GET /health HTTP/1.1 extra\r\n${HOST}\r\n`, 400, 'malformed_request'],
    ['a version that is not HTTP/x.y (HTTP/1.x)', `GET /health HTTP/1.x\r\n${HOST}\r\n`, 400, 'malformed_request'],
    ['a header line without a colon', get('/health', 'NoColonHere\r\n'), 400, 'malformed_request'],
    ['whitespace between a header name and its colon', get('/health', 'X-Test : 1\r\n'), 400, 'malformed_request'],
    ['an obs-fold continuation line', get('/health', 'X-Test: a\r\n  b\r\n'), 400, 'malformed_request'],
    ['a NUL in a header value', get('/health', 'X-Test: a\0b\r\n'), 400, 'malformed_request'],
    ['a control character (0x01) in a header value', get('/health', 'X-Test: a\x01b\r\n'), 400, 'malformed_request'],
    ['a bare CR in a header value', get('/health', 'X-Test: a\rb\r\n'), 400, 'malformed_request'],
    ['a control character (0x01) in a header name', get('/health', 'X-\x01Test: 1\r\n'), 400, 'malformed_request'],
    ['an empty header name', get('/health', ': value\r\n'), 400, 'malformed_request'],
    ['a header name that is not a token', get('/health', 'X(Test): 1\r\n'), 400, 'malformed_request'],
    ...['abc', '-1', '0x10', '1e3', '5, 5', '+5'].map((v) =>
        [`Content-Length: ${v}`, clPost(v, '{"a":'), 400, 'malformed_request']),
    ['two Content-Length headers, equal', `POST /v1/completions HTTP/1.1\r\n${HOST}Content-Length: 2\r\n` +
        'Content-Length: 2\r\n\r\n{}', 400, 'malformed_request'],
    ['Transfer-Encoding with Content-Length', `POST /v1/completions HTTP/1.1\r\n${HOST}Content-Length: 2\r\n` +
        'Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'malformed_request'],
    ['HTTP/1.1 without Host', 'GET /health HTTP/1.1\r\n\r\n', 400, 'malformed_request'],
    ['HTTP/1.1 with two Host headers', `GET /health HTTP/1.1\r\n${HOST}Host: other.example\r\n\r\n`, 400, 'malformed_request'],
    ['a NUL byte in the request target', `GET /hea\0lth HTTP/1.1\r\n${HOST}\r\n`, 400, 'malformed_request'],
    ['%00 in the request path', get('/v1/models/stories%00260K'), 400, 'malformed_request'],
    ['%00 in the request query', get('/health?q=%00'), 400, 'malformed_request'],
    ['a chunk size zz', chunkedPost('zz\r\n{}\r\n0\r\n\r\n'), 400, 'malformed_request'],
    ['a chunk size -1', chunkedPost('-1\r\n{}\r\n0\r\n\r\n'), 400, 'malformed_request'],
    ['no CRLF after a chunk\'s data', chunkedPost('2\r\n{}XX0\r\n\r\n'), 400, 'malformed_request'],
    ['a chunk size over 16 hex digits', chunkedPost('00000000000000002\r\n{}\r\n0\r\n\r\n'), 400, 'malformed_request'],
    ['Transfer-Encoding: gzip, chunked', chunkedPost('2\r\n{}\r\n0\r\n\r\n', 'gzip, chunked'), 501, 'not_implemented'],
    ['Transfer-Encoding: identity', chunkedPost('{}', 'identity'), 501, 'not_implemented'],
    ['HTTP/9.9', `GET /health HTTP/9.9\r\n${HOST}\r\n`, 505, 'http_version_not_supported'],
    ['HTTP/2.0', `GET /health HTTP/2.0\r\n${HOST}\r\n`, 505, 'http_version_not_supported'],
    ['a request target over 8 KiB', get(`/health?x=${'a'.repeat(9000)}`), 414, 'uri_too_long'],
    ['a head over 16 KiB (20 fields of 1000 bytes)',
        get('/health', Array.from({ length: 20 }, (_, i) => `X-Big-${i}: ${'b'.repeat(1000)}\r\n`).join('')),
        431, 'headers_too_large'],
    ['a head over 16 KiB (one field of 17000 bytes)', get('/health', `X-Big: ${'b'.repeat(17000)}\r\n`),
        431, 'headers_too_large'],
    ['101 header fields', get('/health', fields(100)), 431, 'headers_too_large'],
    [`Content-Length ${2 * MAX_BODY} (over --max-body-bytes), no body sent`, clPost(2 * MAX_BODY, ''),
        413, 'body_too_large'],
    ['Content-Length 2^64-1', clPost('18446744073709551615', ''), 413, 'body_too_large'],
    ['Content-Length 2^64', clPost('18446744073709551616', ''), [400, 413], undefined],
];

// [name, request bytes]: requests near those limits that are fine: 200
const FINE = [
    ['a TAB in a header value is fine', get('/health', 'X-Test: a\tb\r\n')],
    ['HTTP/1.0 without Host is fine', 'GET /health HTTP/1.0\r\n\r\n'],
    ['a request target of 8000 bytes is fine', get(`/health?x=${'a'.repeat(7989)}`)],
    ['100 header fields are fine', get('/health', fields(99))],
    ['a chunked body in two chunks is fine', chunkedPost(['{"prompt": "Once"', ', "max_tokens": 2}']
        .map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join('') + '0\r\n\r\n')],
];

// parallel(items, n, fn): fn over items, n at a time; the results in order
async function parallel(items, n, fn) {
    const out = new Array(items.length);
    let next = 0;
    await Promise.all(Array.from({ length: n }, async () => {
        while (next < items.length) {
            const i = next++;
            out[i] = await fn(items[i]);
        }
    }));
    return out;
}

async function brokenRequests() {
    // a few at a time: a server that waits for more bytes costs each its 3 s timeout
    const got = await parallel(BROKEN, 4, ([, bytes]) => rawRequest(bytes));
    BROKEN.forEach(([name, , status, code], i) => {
        const want = `${[status].flat().join(' or ')} ${code ?? '(JSON, any code)'}`;
        check(`${name} -> ${want}`, errorShape(got[i], status, code), `${want}, Connection: close, closed`,
            `${got[i].ms} ms`);
    });
    const fine = await parallel(FINE, 4, ([, bytes]) => rawRequest(bytes, { timeoutMs: 10_000, closeWaitMs: 0 }));
    FINE.forEach(([name], i) => {
        const r = fine[i];
        check(name, r.status === 200 ? null : r.status ? `HTTP ${r.status} ${show(r.body, 300)}` : r.error,
            '200', `${r.ms} ms`);
    });
}

// a chunked body that grows past --max-body-bytes: 64 KiB chunks until an answer comes
async function chunkedTooLarge() {
    const name = `a chunked body growing past ${MAX_BODY} bytes -> 413 body_too_large`;
    const t0 = performance.now();
    let c;
    let r;
    try {
        c = await Conn.open();
        await c.write(`POST /v1/completions HTTP/1.1\r\n${HOST}Content-Type: application/json\r\n` +
            'Transfer-Encoding: chunked\r\n\r\n');
        const chunk = `10000\r\n${'a'.repeat(0x10000)}\r\n`;
        for (let sent = 0; sent <= MAX_BODY + 0x20000 && !c.received && !c.closed; sent += 0x10000) {
            await c.write(chunk);
        }
        const a = await c.readResponse(3000);
        r = { ...a, body: a.body.toString('utf8'), closed: await c.waitClosed(1000) };
    } catch (e) {
        r = { status: 0, error: e.message };
    } finally {
        c?.destroy();
    }
    check(name, errorShape(r, 413, 'body_too_large'), '413 body_too_large, Connection: close, closed', `${ms(t0)} ms`);
}

// half-close: a whole request, then FIN; the whole answer comes, then the server closes
async function halfClose() {
    const json = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 20, ignore_eos: true });
    let r = await rawRequest(post('/v1/completions', json), { halfClose: true, timeoutMs: STREAM_MS, closeWaitMs: 2000 });
    let name = 'half-close after a completion (max_tokens 20, ignore_eos): the whole answer, then closed';
    let failure = null;
    if (r.status !== 200) failure = r.status ? `HTTP ${r.status} ${show(r.body, 300)}` : r.error;
    else {
        try {
            const b = JSON.parse(r.body);
            const fr = b.choices?.[0]?.finish_reason;
            const n = b.usage?.completion_tokens;
            if (fr !== 'length' || n !== 20) failure = `finish_reason ${JSON.stringify(fr)}, completion_tokens ${n}`;
            else if (!r.closed) failure = 'the whole answer, but the connection still open 2 s later';
        } catch {
            failure = `a body that is not JSON: ${show(r.body, 300)}`;
        }
    }
    check(name, failure, '200, finish_reason "length", 20 completion tokens, then closed', `${r.ms} ms`);

    const stream = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 20, ignore_eos: true, stream: true });
    r = await rawRequest(post('/v1/completions', stream), { halfClose: true, timeoutMs: STREAM_MS, closeWaitMs: 2000 });
    name = 'half-close after a streaming completion: every event to data: [DONE], then closed';
    const events = r.body.split('\n').filter((l) => l.startsWith('data: '));
    const finish = (() => {
        try {
            return JSON.parse(events.at(-2)?.slice(6)).choices?.[0]?.finish_reason;
        } catch {
            return undefined;
        }
    })();
    failure = r.status !== 200 ? (r.status ? `HTTP ${r.status} ${show(r.body, 300)}` : r.error)
        : events.at(-1) !== 'data: [DONE]' ? `${events.length} events, the last ${show(events.at(-1) ?? '')}`
        : finish !== 'length' ? `the last event before [DONE] has finish_reason ${JSON.stringify(finish)}`
        : !r.closed ? 'the whole stream, but the connection still open 2 s later' : null;
    check(name, failure, '200, events to finish_reason "length" and data: [DONE], then closed',
        `${events.length} events in ${r.ms} ms`);

    r = await rawRequest(get('/health'), { halfClose: true, closeWaitMs: 2000 });
    check('half-close after GET /health: 200, then closed',
        r.status !== 200 ? (r.status ? `HTTP ${r.status}` : r.error) : !r.closed ? 'still open 2 s later' : null,
        '200, then closed', `${r.ms} ms`);
}

// keep-alive and pipelining on one connection
async function keepAlive() {
    const one = async (name, fn, expected) => {
        let c;
        let failure;
        try {
            c = await Conn.open();
            failure = await fn(c);
        } catch (e) {
            failure = e.message;
        } finally {
            c?.destroy();
        }
        check(name, failure, expected);
    };
    const json = (r) => JSON.parse(r.body.toString('utf8'));

    await one('keep-alive: three requests one after another on one connection', async (c) => {
        await c.write(get('/health'));
        const a = await c.readResponse(3000);
        await c.write(post('/v1/completions', completion()));
        const b = await c.readResponse(STREAM_MS);
        await c.write(get('/v1/models'));
        const d = await c.readResponse(3000);
        const got = `${a.status} ${b.status} ${d.status}`;
        if (got !== '200 200 200') return `HTTP ${got}`;
        if (json(a).status !== 'ok' || typeof json(b).choices?.[0]?.text !== 'string' || json(d).object !== 'list') {
            return `bodies ${show(a.body, 80)} ${show(b.body, 80)} ${show(d.body, 80)}`;
        }
        return c.closed ? 'closed after the third answer' : null;
    }, '200 {"status":"ok"}, 200 a completion, 200 the model list; the connection still open');

    await one('pipelining: two requests in one write get two answers in order', async (c) => {
        await c.write(get('/health') + get('/version'));
        const a = await c.readResponse(3000);
        const b = await c.readResponse(3000);
        if (a.status !== 200 || b.status !== 200) return `HTTP ${a.status} ${b.status}`;
        if (json(a).status !== 'ok' || typeof json(b).version !== 'string') {
            return `bodies ${show(a.body, 80)}, ${show(b.body, 80)}`;
        }
        return null;
    }, '200 /health then 200 /version');

    await one('pipelining: a completion and /health in one write, in order', async (c) => {
        await c.write(post('/v1/completions', completion()) + get('/health'));
        const a = await c.readResponse(STREAM_MS);
        const b = await c.readResponse(3000);
        if (a.status !== 200 || b.status !== 200) return `HTTP ${a.status} ${b.status}`;
        if (typeof json(a).choices?.[0]?.text !== 'string' || json(b).status !== 'ok') {
            return `bodies ${show(a.body, 80)}, ${show(b.body, 80)}`;
        }
        return null;
    }, '200 the completion then 200 /health');

    await one('pipelining: a malformed second request gets its own JSON 400 after the first answer', async (c) => {
        await c.write(get('/health') + 'GARBAGE\r\n\r\n');
        const a = await c.readResponse(3000);
        if (a.status !== 200) return `first answer HTTP ${a.status}`;
        const b = await c.readResponse(3000);
        return errorShape({ ...b, body: b.body.toString('utf8'), closed: await c.waitClosed(1000) },
            400, 'malformed_request');
    }, '200, then 400 malformed_request with Connection: close, then closed');

    await one('keep-alive: a malformed request after a served one gets a JSON 400', async (c) => {
        await c.write(get('/health'));
        const a = await c.readResponse(3000);
        if (a.status !== 200) return `first answer HTTP ${a.status}`;
        await c.write(get('/health', 'X-Test : 1\r\n'));
        const b = await c.readResponse(3000);
        return errorShape({ ...b, body: b.body.toString('utf8'), closed: await c.waitClosed(1000) },
            400, 'malformed_request');
    }, '200, then 400 malformed_request with Connection: close, then closed');
}

// the deadlines, all at once on their own connections: idle ones closed silently, an
// unfinished head or body answered 408
async function deadlines() {
    const idle = async () => { // connected, no byte sent
        const c = await Conn.open();
        const t0 = performance.now();
        await c.waitClosed((KEEP_ALIVE_S * 1000) + SLACK_MS);
        return { c, t0 };
    };
    const kept = async () => { // one answer, then idle between requests
        const c = await Conn.open();
        await c.write(get('/health'));
        const a = await c.readResponse(3000);
        const t0 = performance.now();
        await c.waitClosed((KEEP_ALIVE_S * 1000) + SLACK_MS);
        return { c, t0, a }; // what came after the answer stays in c.buf
    };
    const stalled = async (bytes, limitS) => { // a request that stops short; 408 expected
        const c = await Conn.open();
        const t0 = performance.now();
        await c.write(bytes);
        let r;
        try {
            const a = await c.readResponse((limitS * 1000) + SLACK_MS);
            r = { ...a, body: a.body.toString('utf8'), closed: await c.waitClosed(1000) };
        } catch (e) {
            r = { status: 0, error: e.message };
        }
        return { c, t0, r, at: r.at ? r.at - t0 : null };
    };
    const settle = (p) => p.then((v) => ({ v }), (e) => ({ e: e.message }));
    const [a, b, h, d] = await Promise.all([
        settle(idle()),
        settle(kept()),
        settle(stalled(`GET /health HTTP/1.1\r\n${HOST}X-Slow: 1\r\n`, HEADER_TIMEOUT_S)),
        settle(stalled(clPost(100, '{"prompt": "a'), BODY_TIMEOUT_S)),
    ]);
    for (const x of [a, b, h, d]) x.v?.c.destroy();

    const silentClose = (name, x, detail) => {
        const expected = `closed with no byte sent between ${KEEP_ALIVE_S - 0.5} and ${KEEP_ALIVE_S} + 2 s`;
        if (x.e) return fail(name, expected, x.e);
        const { c, t0 } = x.v;
        const at = c.closedAt - t0;
        const ended = c.closedAt !== null && at <= (KEEP_ALIVE_S * 1000) + SLACK_MS;
        check(name, !ended ? `still open after ${KEEP_ALIVE_S * 1000 + SLACK_MS} ms`
            : at < (KEEP_ALIVE_S - 0.5) * 1000 ? `closed already after ${Math.round(at)} ms`
            : detail(x.v), expected, `closed after ${Math.round(at)} ms`);
    };
    silentClose(`a connection that sends nothing is closed silently after --keep-alive-seconds ${KEEP_ALIVE_S}`, a,
        ({ c }) => (c.received ? `${c.received} bytes came: ${show(c.buf)}` : null));
    silentClose(`a kept-alive connection idle after an answer is closed silently after ${KEEP_ALIVE_S} s`, b,
        ({ c, a: ans }) => (ans.status !== 200 ? `the first answer HTTP ${ans.status}`
            : c.buf.length ? `bytes after the answer: ${show(c.buf)}` : null));

    const timedOut = (name, x, limitS) => {
        const expected = `408 request_timeout, Connection: close, closed, between ${limitS - 0.5} and ${limitS} + 2 s`;
        if (x.e) return fail(name, expected, x.e);
        const { r, at } = x.v;
        const shape = errorShape(r, 408, 'request_timeout');
        check(name, shape ?? (at < (limitS - 0.5) * 1000 ? `answered already after ${Math.round(at)} ms` : null),
            expected, `after ${Math.round(at)} ms`);
    };
    timedOut(`a head unfinished for --header-timeout-seconds ${HEADER_TIMEOUT_S} -> 408`, h, HEADER_TIMEOUT_S);
    timedOut(`a body unfinished for --timeout-seconds ${BODY_TIMEOUT_S} -> 408`, d, BODY_TIMEOUT_S);
}

// openIdle(n): n connections that never send a byte, opened at once; those connected (in the
// order they connected) and how many did not within 1 s
async function openIdle(n) {
    const conns = [];
    let refused = 0;
    await Promise.all(Array.from({ length: n }, () => Conn.open(1000).then((c) => conns.push(c), () => refused++)));
    return { conns, refused };
}

// an attack, with /health and /metrics probed and a streaming completion beside it
async function underAttack(label, probeMs) {
    const [probes, stream] = await Promise.all([probeFor(probeMs),
        sleep(300).then(() => streamCompletion())]);
    check(`(${label}) /health and /metrics answer 200 within 1 s`, probes.failure, `every probe 200 within ${PROBE_MS} ms`,
        probes.seen);
    check(`(${label}) a streaming completion (max_tokens 30) alongside ends with [DONE]`, stream.failure,
        '200 and data: [DONE] last', stream.seen);
}

// (a) 300 connections that never send a byte
async function idleFlood() {
    const { conns, refused } = await openIdle(300);
    const label = `a: 300 idle connections (${conns.length} connected, ${refused} not)`;
    await underAttack(label, 3000);
    for (const c of conns) c.destroy();
    await recovered('300 idle connections');
}

// (b) slowloris: 50 connections, each sending one byte of a valid head a second
async function slowloris() {
    const head = Buffer.from(`GET /health HTTP/1.1\r\n${HOST}User-Agent: ${'slow'.repeat(20)}\r\n\r\n`);
    const { conns, refused } = await openIdle(50);
    const sent = new Map(conns.map((c) => [c, 0]));
    const firstAt = new Map();
    const tick = () => {
        for (const c of conns) {
            if (c.closed || c.received) continue;
            const i = sent.get(c);
            if (i >= head.length) continue;
            if (i === 0) firstAt.set(c, performance.now());
            sent.set(c, i + 1);
            c.write(head.subarray(i, i + 1));
        }
    };
    tick();
    const timer = setInterval(tick, 1000);
    const label = `b: 50 slowloris connections (${conns.length} connected, ${refused} not)`;
    try {
        await underAttack(label, 3000);
        // every one answered 408 or closed within header-timeout + 2 s of its first byte
        const limit = (HEADER_TIMEOUT_S * 1000) + SLACK_MS;
        const last = Math.max(...firstAt.values());
        await Promise.all(conns.map((c) => c.waitClosed(Math.max(0, last + limit - performance.now()))));
        await sleep(200); // an answer that came as the connection closed is read
        const late = [];
        const wrong = [];
        let answered = 0;
        for (const c of conns) {
            const t = Math.min(c.firstDataAt ?? Infinity, c.closedAt ?? Infinity) - firstAt.get(c);
            if (!(t <= limit)) late.push(Number.isFinite(t) ? `${Math.round(t)} ms` : 'still open');
            if (c.received) {
                const status = /^HTTP\/1\.[01] (\d{3})/.exec(c.buf.toString('latin1'))?.[1];
                if (status !== '408') wrong.push(show(c.buf, 120));
                else answered++;
            }
        }
        check(`(${label}) each is answered 408 or closed within ${HEADER_TIMEOUT_S} + 2 s of its first byte`,
            conns.length === 0 ? 'no connection made'
            : late.length ? `${late.length} of ${conns.length} not in time: ${late.slice(0, 5).join(', ')}`
            : wrong.length ? `${wrong.length} answered other than 408: ${wrong[0]}` : null,
            `408 or closed within ${limit} ms`, `${answered} answered 408, ${conns.length - answered} closed`);
    } finally {
        clearInterval(timer);
        for (const c of conns) c.destroy();
    }
    await recovered('slowloris');
}

// (c) 8 connections sending a body of 1000 bytes at one byte a second
async function slowBodies() {
    const { conns, refused } = await openIdle(8);
    const label = `c: 8 slow body senders (${conns.length} connected, ${refused} not)`;
    await Promise.all(conns.map((c) => c.write(clPost(1000, ''))));
    const timer = setInterval(() => { for (const c of conns) if (!c.closed) c.write('a'); }, 1000);
    try {
        await underAttack(label, 3000);
    } finally {
        clearInterval(timer);
        for (const c of conns) c.destroy();
    }
    await recovered('slow body senders');
}

// 400 idle connections against a pool of 96: the oldest idle are closed to make room
async function beyondThePool() {
    const conns = [];
    let refused = 0;
    for (let i = 0; i < 4; i++) { // in waves, so that which are the oldest is clear
        const w = await openIdle(100);
        conns.push(...w.conns);
        refused += w.refused;
    }
    const label = `400 idle connections, pool ${POOL}: ${conns.length} connected, ${refused} not`;
    const t0 = performance.now();
    const p = await probeHealth();
    check(`(${label}) /health answers 200 within 1 s`, p.ok ? null : p.got, `200 within ${PROBE_MS} ms`, p.got);
    // well before the keep-alive deadline of the newest: the oldest closed, the newest open
    await sleep(Math.max(0, 1000 - ms(t0)));
    const open = conns.filter((c) => !c.closed).length;
    const newestClosed = conns.slice(-20).filter((c) => c.closed).length;
    const oldestOpen = conns.slice(0, 50).filter((c) => !c.closed).length;
    check(`(${label}) the oldest idle are closed to make room, the newest kept`,
        open > POOL ? `${open} still open`
        : newestClosed ? `${newestClosed} of the newest 20 closed`
        : oldestOpen ? `${oldestOpen} of the oldest 50 still open` : null,
        `at most ${POOL} open 1 s after the last connected, the newest 20 among them, none of the oldest 50`,
        `${open} open`);
    const s = await streamCompletion();
    check(`(${label}) a streaming completion after them ends with [DONE]`, s.failure, '200 and data: [DONE] last', s.seen);
    for (const c of conns) c.destroy();
    await recovered('400 idle connections');
}

// ---- main ---------------------------------------------------------------------------------

function openFilesLimit() {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return !m || m[1] === 'unlimited' ? Infinity : Number(m[1]);
}

function finish(code) {
    destroyAll();
    if (server) server.kill('SIGKILL');
    console.log(`# ${(ms(started) / 1000).toFixed(1)} s`);
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(code ?? (failed ? 1 : 0));
}

process.on('exit', () => { if (server) server.kill('SIGKILL'); });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => {
    fail('the tests ran to their end', 'no signal', sig);
    finish(1);
});
setTimeout(() => {
    fail(`the whole file finishes within ${WATCHDOG_MS / 1000} s`, 'the end', 'still running; stopped');
    finish(1);
}, WATCHDOG_MS).unref();

async function main() {
    const limit = openFilesLimit();
    if (limit < SOCKETS_MAX + 64) {
        fail('enough file descriptors', `ulimit -n at least ${SOCKETS_MAX + 64}`, `${limit}`);
        return;
    }
    if (!(await startServer())) return;
    const cases = [brokenRequests, chunkedTooLarge, halfClose, keepAlive, deadlines,
        idleFlood, slowloris, slowBodies, beyondThePool];
    for (const f of cases) {
        if (!server) break;
        const t0 = performance.now();
        await f();
        destroyAll();
        console.log(`# ${f.name}: ${(ms(t0) / 1000).toFixed(1)} s`);
    }
    if (!server) {
        const x = await serverExit;
        fail('the server runs through the cases', 'running', `exited (status ${x.code}, signal ${x.signal})`,
            ...stderrLines(8));
        return;
    }
    await stopServer();
}

main().then(() => finish(), (e) => {
    fail('the tests ran to their end', 'no exception', e.stack ?? String(e));
    finish(1);
});
