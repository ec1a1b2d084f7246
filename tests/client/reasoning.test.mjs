// A thinking model's replies through real clients: the official `openai` npm package and the page
// at / in Debian's chromium (puppeteer-core), both pinned in package-lock.json. Run by
// tests/client/client.sh with SNUG_BUILD (the build directory). This file starts its own server
// on a small Qwen3 (snug mkmodel --preset qwen3-1.7b, 1 layer, hidden 64: Qwen3's tokenizer
// config and template, random weights) and makes it write "<think>...</think>\n\nanswer" with a
// grammar and a bias on the <think> token. It checks: the SDK's chat.completions.create gives
// the reasoning as message.reasoning_content (and .reasoning) beside the content, and streamed as
// delta.reasoning_content chunks before the content chunks, the same text; thinking_token_budget
// and chat_template_kwargs pass through the SDK as body fields; the page shows the reasoning
// folded in a <details> above the answer (the page's request is given the grammar on its way,
// by puppeteer's request interception: the page itself sends what it always sends).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { servingBase, stopServer } from './serving.mjs';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import puppeteer from 'puppeteer-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = path.resolve(process.env.SNUG_BUILD ?? path.join(root, 'build'));
const T = { timeout: 60_000 };
const THINK_ID = 151667;
const GRAMMAR = 'root ::= "<think>" [a-z ]{2,24} "</think>" "\\n\\n" [a-z]{2,8}';
const messages = [{ role: 'user', content: 'Think, then answer.' }];

let tmp, server, base, client, browser;

before(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'snug-reasoning-client-'));
    const model = path.join(tmp, 'qwen3');
    execFileSync(path.join(build, 'snug'), ['mkmodel', '--preset', 'qwen3-1.7b', '--layers', '1', '--hidden', '64',
        '--heads', '2', '--kv-heads', '1', '--intermediate', '64', '--dtype', 'bf16', model], { cwd: root, stdio: 'ignore' });
    server = spawn(path.join(build, 'snug'), ['serve', model, '--port', '0', '--threads', '1', '--max-model-len', '512',
        '--no-access-log'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    base = await servingBase(server);
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
});

after(async () => {
    await browser?.close();
    await stopServer(server);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// the fields that make the random model think first (the SDK sends unknown fields as they are)
const thinking = { grammar: GRAMMAR, logit_bias: { [THINK_ID]: 100 }, max_tokens: 60 };

test('the SDK: reasoning_content and reasoning beside the content', T, async () => {
    const r = await client.chat.completions.create({ model: 'qwen3', messages, seed: 1, ...thinking });
    const m = r.choices[0].message;
    assert.equal(typeof m.reasoning_content, 'string', JSON.stringify(m));
    assert.match(m.reasoning_content, /^[a-z][a-z ]*[a-z]$|^[a-z]$/, 'the think block, trimmed');
    assert.equal(m.reasoning, m.reasoning_content);
    assert.match(m.content, /^[a-z]{2,8}$/, 'the answer after </think>');
    assert.equal(r.choices[0].finish_reason, 'stop');
});

test('the SDK, streamed: reasoning chunks, then content chunks, the same text', T, async () => {
    const whole = await client.chat.completions.create({ model: 'qwen3', messages, seed: 2, ...thinking });
    const stream = await client.chat.completions.create({ model: 'qwen3', messages, seed: 2, stream: true, ...thinking });
    let reasoning = '', content = '', kinds = '';
    for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta ?? {};
        if (d.reasoning_content) { reasoning += d.reasoning_content; kinds += 'r'; }
        if (d.content) { content += d.content; kinds += 'c'; }
    }
    assert.match(kinds, /^r+c+$/, `reasoning chunks before content chunks: ${kinds}`);
    assert.equal(reasoning, whole.choices[0].message.reasoning_content);
    assert.equal(content, whole.choices[0].message.content);
});

test('the SDK: thinking_token_budget and chat_template_kwargs as body fields', T, async () => {
    const r = await client.chat.completions.create({ model: 'qwen3', messages, seed: 3, logprobs: true,
        thinking_token_budget: 2, ...thinking, grammar: GRAMMAR.replace('[a-z ]{2,24}', '[a-z ]{1,24} "\\n"?') });
    const tokens = r.choices[0].logprobs.content.map((t) => t.token);
    assert.deepEqual(tokens.slice(0, 6).slice(3), ['\n', '</think>', '\n\n'], `the close forced after 2: ${JSON.stringify(tokens)}`);
    const off = await client.chat.completions.create({ model: 'qwen3', messages, max_tokens: 2,
        chat_template_kwargs: { enable_thinking: false } });
    const on = await client.chat.completions.create({ model: 'qwen3', messages, max_tokens: 2 });
    assert.equal(off.usage.prompt_tokens, on.usage.prompt_tokens + 4, 'the empty think block in the prompt');
});

test('the page shows the reasoning folded above the answer', T, async () => {
    browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true,
        args: ['--no-sandbox', '--disable-gpu'] });
    const page = await browser.newPage();
    await page.setRequestInterception(true);
    let sent = null; // the page's request as it went, the grammar added
    page.on('request', (req) => {
        if (req.method() === 'POST' && req.url().endsWith('/v1/chat/completions')) {
            sent = { ...JSON.parse(req.postData()), seed: 4, ...thinking };
            req.continue({ postData: JSON.stringify(sent) });
        } else {
            req.continue();
        }
    });
    await page.goto(base, { waitUntil: 'load' });
    await page.evaluate(() => localStorage.clear());
    await page.reload({ waitUntil: 'load' });
    await page.type('#input', 'Think, then answer.');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => {
        const m = [...document.querySelectorAll('.msg.assistant')].at(-1);
        return m && m.dataset.streaming === 'false';
    }, { timeout: 30_000 });
    const shown = await page.evaluate(() => {
        const m = [...document.querySelectorAll('.msg.assistant')].at(-1);
        const d = m.querySelector('details.reasoning');
        return { open: d?.open, summary: d?.querySelector('summary')?.textContent, reasoning: d?.querySelector('p')?.textContent,
            body: m.querySelector('.body').textContent, before: d ? d.compareDocumentPosition(m.querySelector('.body')) : 0 };
    });
    assert.ok(sent?.stream, 'the page streams');
    const want = await client.chat.completions.create({ ...sent, stream: false }); // the same request, whole
    assert.equal(shown.open, false, 'folded');
    assert.equal(shown.summary, 'Reasoning');
    assert.equal(shown.reasoning, want.choices[0].message.reasoning_content);
    assert.equal(shown.body, want.choices[0].message.content);
    assert.ok(shown.before & 4, 'the reasoning above the answer'); // DOCUMENT_POSITION_FOLLOWING
    // kept in the conversation: a reload shows it again, folded
    await page.reload({ waitUntil: 'load' });
    const again = await page.$eval('.msg.assistant details.reasoning p', (p) => p.textContent);
    assert.equal(again, want.choices[0].message.reasoning_content);
});
