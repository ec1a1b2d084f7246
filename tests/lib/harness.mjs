// harness.mjs: what the node tests of `snug serve` share (tests/server/*.mjs): the ok/FAIL lines
// and the "N passed, M failed" summary that tests/run counts, a server started on a free port of
// 127.0.0.1 and stopped with SIGTERM (which must end it with status 0), and a watchdog that fails
// the file when it runs too long. Only node's built-in modules.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// the build directory: the first argument (default build), from where the test was started
export const build = path.resolve(process.cwd(), process.argv[2] ?? 'build');

const started = performance.now();
let passed = 0;
let failed = 0;

export const ok = (name, got) => {
    console.log(`ok - ${name}${got ? ` (${got})` : ''}`);
    passed++;
};
export const fail = (name, ...details) => {
    console.log(`FAIL - ${name}`);
    for (const l of details) if (l) console.log(`  ${l}`);
    failed++;
};
// check(name, failure or null, got, ...details): one line for a check
export const check = (name, failure, got, ...details) => (failure ? fail(name, failure, ...details) : ok(name, got));
// v as JSON, cut to n characters
export const show = (v, n = 600) => {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > n ? `${s.slice(0, n)}...` : s;
};

// POSTs body as JSON to base + endpoint, waiting ms at most: {status, raw} (status 0 and the
// reason in raw when nothing answered).
export async function postJson(base, endpoint, body, ms) {
    try {
        const res = await fetch(`${base}${endpoint}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(ms),
        });
        return { status: res.status, raw: await res.text() };
    } catch (e) {
        return { status: 0, raw: `no answer: ${e.message}` };
    }
}

// Adds a streamed tool-call delta t (OpenAI's chunk.choices[0].delta.tool_calls[i]) to calls,
// the calls put together so far, by their index.
export function addToolCallDelta(calls, t) {
    const call = (calls[t.index] ??= { id: '', type: '', name: '', arguments: '' });
    call.id += t.id ?? '';
    call.type += t.type ?? '';
    call.name += t.function?.name ?? '';
    call.arguments += t.function?.arguments ?? '';
}

// `snug serve` with args (after --port 0): start() waits for its "serving ... on URL" line (30 s)
// and checks it came; base is then the URL; stop() sends SIGTERM and checks the exit.
export class Server {
    constructor(args, label = 'the server') {
        this.args = args;
        this.label = label;
        this.proc = null;
        this.base = null;
        this.err = ''; // the tail of its stderr
        this.exit = null; // a promise of {code, signal}
    }

    get running() { return this.proc !== null; }
    get pid() { return this.proc?.pid; }
    errTail(n = 8) { return this.err.split('\n').slice(-n); }

    async start() {
        const bin = path.join(build, 'snug');
        this.err = '';
        this.proc = spawn(bin, ['serve', '--port', '0', ...this.args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
        this.exit = new Promise((resolve) => this.proc.once('exit', (code, signal) => {
            this.proc = null;
            resolve({ code, signal });
        }));
        this.proc.once('error', (e) => { this.err += `cannot run ${bin}: ${e.message}\n`; });
        this.proc.stderr.setEncoding('utf8');
        this.proc.stderr.on('data', (d) => { this.err = (this.err + d).slice(-4000); });
        this.proc.stdout.setEncoding('utf8');
        let out = '';
        this.base = await new Promise((resolve) => {
            const timer = setTimeout(() => resolve(null), 30_000);
            this.proc.stdout.on('data', (d) => {
                out = (out + d).slice(-8000);
                const m = /^serving .* on (http:\/\/[0-9.]+:\d+)/m.exec(out);
                if (m) {
                    clearTimeout(timer);
                    resolve(m[1]);
                }
            });
            this.exit.then(() => {
                clearTimeout(timer);
                resolve(null);
            });
        });
        check(`${this.label} started`, this.base ? null : "no 'serving ... on http://HOST:PORT' line within 30 s",
            this.base, ...out.split('\n').slice(-5), ...this.errTail(5));
        return this.base !== null;
    }

    // a failed check when the server has exited before its time
    async died() {
        const x = await this.exit;
        fail(`${this.label} runs through the checks`, `exited (status ${x.code}, signal ${x.signal})`, ...this.errTail());
    }

    async stop() {
        const name = `${this.label} exits 0 on SIGTERM within 10 s`;
        if (!this.proc) {
            const x = await this.exit;
            return fail(name, `it had exited (status ${x?.code}, signal ${x?.signal})`, ...this.errTail());
        }
        this.proc.kill('SIGTERM');
        const x = await Promise.race([this.exit, sleep(10_000).then(() => null)]);
        if (!x) {
            this.proc?.kill('SIGKILL');
            return fail(name, 'still running after 10 s; killed');
        }
        return check(name, x.code === 0 ? null : `status ${x.code}, signal ${x.signal}`, null, ...this.errTail(5));
    }

    // runs checks (async functions) in order while the server runs, timing each, then stops it
    async checkThenStop(checks) {
        for (const f of checks) {
            if (!this.running) break;
            const t0 = performance.now();
            await f();
            console.log(`# ${f.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        }
        if (!this.running) return this.died();
        return this.stop();
    }

    kill() { if (this.proc) this.proc.kill('SIGKILL'); }
}

// The file's end: servers killed, cleanup run, the time and the summary printed, exit status
// 1 when a check failed (or code).
let atEnd = () => {};
export function finish(code) {
    atEnd();
    console.log(`# ${((performance.now() - started) / 1000).toFixed(1)} s`);
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(code ?? (failed ? 1 : 0));
}

// Runs main (an async function) under a watchdog of watchdogMs: servers (a function giving the
// Server objects to kill) and cleanup run at the end however it ends; a thrown error or a
// signal is a failed check.
export function run(main, { watchdogMs = 100_000, servers = () => [], cleanup = () => {} } = {}) {
    atEnd = () => {
        for (const s of servers()) s?.kill();
        cleanup();
    };
    process.on('exit', () => { for (const s of servers()) s?.kill(); });
    for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => {
        fail('the tests ran to their end', `stopped by ${sig}`);
        finish(1);
    });
    setTimeout(() => {
        fail(`the whole file finishes within ${watchdogMs / 1000} s`, 'still running; stopped');
        finish(1);
    }, watchdogMs).unref();
    main().then(() => finish(), (e) => {
        fail('the tests ran to their end', e.stack ?? String(e));
        finish(1);
    });
}
