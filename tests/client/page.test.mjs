// The page at / in a real browser: Debian's chromium, headless, driven by puppeteer-core
// (pinned in package-lock.json). Run by tests/client/client.sh with
//   SNUG_BUILD      the build directory (its snug)
//   SNUG_ARTIFACTS  where the mid-stream screenshot goes (page-midstream.png)
// This file starts its own server on a small synthetic Llama (4 layers, hidden 512, the Llama 3
// tokenizer: snug mkmodel, ~85 tokens/s on one thread, so that a reply lasts seconds and the
// memory view, polled twice a second, sees it) with an API key and TinyLlama's chat template.
// It checks: the page asks for the API key, then shows the plan and the model's name; a
// message's reply streams in; "KV blocks in use" rises during it and falls back to 0 after;
// Stop ends a reply early and the server frees it; the conversation and settings survive a
// reload; an over-long request shows the server's error; the page fits a phone's width.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { servingBase, stopServer } from './serving.mjs';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = path.resolve(process.env.SNUG_BUILD ?? path.join(root, 'build')); // relative: to the cwd
const artifacts = path.resolve(process.env.SNUG_ARTIFACTS ?? path.join(build, 'test-artifacts'));
const KEY = 'page-key';
const T = { timeout: 60_000 };

let tmp, server, base, browser, page;

async function startServer() {
    tmp = mkdtempSync(path.join(tmpdir(), 'snug-page-'));
    const model = path.join(tmp, 'pm');
    execFileSync(path.join(build, 'snug'), ['mkmodel', '--preset', 'llama-3.2-1b', '--dtype', 'bf16', '--layers', '4',
        '--hidden', '512', '--intermediate', '1536', '--heads', '8', '--kv-heads', '2', model], { cwd: root, stdio: 'ignore' });
    server = spawn(path.join(build, 'snug'), ['serve', model, '--port', '0', '--threads', '1', '--memory', '1GiB',
        '--max-model-len', '1024', '--api-key', KEY, '--chat-template', 'tests/data/chat/tinyllama-1.1b-chat.jinja',
        '--no-access-log', '--timeline'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    base = await servingBase(server);
}

// memory(): GET /v1/memory as the page reads it
async function memory() {
    const r = await fetch(`${base}/v1/memory`, { headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(r.status, 200);
    return r.json();
}

// kvInUse(): the page's "KV blocks in use" figure
const kvInUse = () => page.$eval('[data-part="KV blocks in use"]', (e) => parseInt(e.textContent, 10));

// reply(): the text of the page's last assistant message, and whether it still streams
const reply = () => page.evaluate(() => {
    const all = document.querySelectorAll('.msg.assistant');
    const m = all[all.length - 1];
    return m ? { text: m.querySelector('.body').textContent, streaming: m.dataset.streaming === 'true',
        note: m.querySelector('.note')?.textContent ?? '' } : null;
});

async function until(what, f, ms = 30_000) {
    const t0 = Date.now();
    for (;;) {
        const v = await f();
        if (v) return v;
        if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
        await new Promise((r) => setTimeout(r, 50));
    }
}

// send(text): types text and presses Enter; returns once the page shows the message, or an
// error (a request refused at once takes its message back out, maybe before a look finds it)
async function send(text) {
    const n = await page.$$eval('.msg.user', (l) => l.length);
    await page.focus('#input');
    await page.keyboard.type(text);
    await page.keyboard.press('Enter');
    await until('the message shown, or an error', () => page.evaluate((n) =>
        document.querySelectorAll('.msg.user').length > n || !document.getElementById('chat-error').hidden, n), 5_000);
}

before(async () => {
    await startServer();
    browser = await puppeteer.launch({
        executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
});

after(async () => {
    await browser?.close();
    await stopServer(server);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('the page asks for the API key, then shows the plan and the model', T, async () => {
    const res = await page.goto(`${base}/`);
    assert.equal(res.status(), 200);
    assert.match(res.headers()['content-type'], /^text\/html/);
    await page.waitForSelector('#key-dialog[open]', { timeout: 10_000 });
    await page.type('#key', KEY);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#key-dialog:not([open])');
    await page.waitForSelector('[data-part="Weights"]', { timeout: 10_000 });
    const m = await memory();
    const weights = m.plan.find((p) => p.part === 'weights').bytes;
    const shown = await page.$eval('[data-part="Weights"]', (e) => e.textContent);
    assert.equal(shown, `${(weights / 2 ** 20).toFixed(1)} MiB`, `weights of ${weights} bytes shown as ${shown}`);
    assert.match(await page.$eval('#model', (e) => e.textContent), /^pm \(1024 positions\)/);
    assert.equal(await kvInUse(), 0);
    assert.ok(await page.$('#timeline a[href="/timeline.svg"]'), 'a link to the start-up timeline');
    // the link stays the same node across polls (a node rebuilt at each poll loses clicks)
    await page.$eval('#timeline a', (e) => { e.dataset.seen = '1'; });
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal(await page.$eval('#timeline a', (e) => e.dataset.seen ?? ''), '1', 'the link kept across polls');
    // /timeline.svg is behind the key: the page fetches it with the key and shows it
    await page.click('#timeline a[href="/timeline.svg"]');
    await page.waitForSelector('#timeline img[src^="data:image/svg+xml;base64,"]', { timeout: 10_000 });
    const natural = await page.$eval('#timeline img', async (e) => { await e.decode(); return e.naturalWidth; });
    assert.ok(natural > 0, `the timeline drawn (${natural} pixels wide)`);
});

test('a reply streams in; KV blocks in use rise during it and fall back after', T, async () => {
    await page.$eval('#max-tokens', (e) => { e.value = '400'; e.dispatchEvent(new Event('change')); });
    await send('Tell me a long story.');
    const first = await until('the reply\'s first text', async () => { const r = await reply(); return r?.text && r; });
    assert.ok(first.streaming, 'text shows while the reply streams');
    const busy = await until('KV blocks in use > 0 while it streams', async () => {
        const [n, r] = [await kvInUse(), await reply()];
        return r.streaming && n > 0 ? n : 0;
    }, 10_000);
    await until('a few lines of it', async () => (await reply()).text.length > 300, 20_000);
    const lengths = [(await reply()).text.length];
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'page-midstream.png') });
    await until('more text', async () => (await reply()).text.length > lengths[0]);
    await until('the reply to end', async () => !(await reply()).streaming, 40_000);
    const done = await reply();
    assert.ok(done.text.length > lengths[0]);
    await until('KV blocks in use back to 0', async () => (await kvInUse()) === 0, 5_000);
    assert.ok(busy > 0);
    assert.equal((await memory()).kv.blocks_used, 0);
});

test('Stop ends a reply early, and the server lets it go', T, async () => {
    // (the conversation so far, ~450 tokens, and 500 more fit in 1024 positions)
    await page.$eval('#max-tokens', (e) => { e.value = '500'; e.dispatchEvent(new Event('change')); });
    await send('Another one, please.');
    assert.equal(await page.$eval('#chat-error', (e) => e.hidden), true, 'no error');
    await until('the reply\'s first text', async () => (await reply())?.text);
    await page.click('#stop');
    const r = await until('the reply to stop', async () => { const x = await reply(); return !x.streaming && x; }, 5_000);
    assert.equal(r.note, 'stopped');
    await until('nothing running on the server', async () => {
        const m = await memory();
        return m.sequences.running === 0 && m.kv.blocks_used === 0;
    }, 10_000);
});

test('the conversation and settings survive a reload', T, async () => {
    const before = await page.$$eval('.msg', (l) => l.map((e) => e.className));
    assert.equal(before.length, 4);
    await page.reload();
    await page.waitForSelector('[data-part="Weights"]', { timeout: 10_000 });
    assert.equal(await page.$('#key-dialog[open]'), null, 'the key is remembered');
    assert.deepEqual(await page.$$eval('.msg', (l) => l.map((e) => e.className)), before);
    assert.equal(await page.$eval('#max-tokens', (e) => e.value), '500');
});

test('a conversation over the model length shows the error, the message kept to send again', T, async () => {
    // the conversation so far and 1000 more tokens do not fit in 1024 positions
    await page.$eval('#max-tokens', (e) => { e.value = '1000'; e.dispatchEvent(new Event('change')); });
    await send('Once more.');
    await page.waitForSelector('#chat-error:not([hidden])', { timeout: 10_000 });
    assert.match(await page.$eval('#chat-error', (e) => e.textContent), /too long for the model: this model's maximum/);
    assert.equal(await page.$eval('#input', (e) => e.value), 'Once more.');
    assert.equal((await page.$$('.msg')).length, 4, 'the failed message left the conversation');
    await page.$eval('#max-tokens', (e) => { e.value = '64'; e.dispatchEvent(new Event('change')); });
});

test('New chat empties the conversation; the page fits a phone\'s width', T, async () => {
    await page.click('#clear');
    assert.equal((await page.$$('.msg')).length, 0);
    await page.setViewport({ width: 390, height: 844 });
    const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(scroll <= inner, `the page is ${scroll} px wide in a ${inner} px window`);
});
