// bench/session-client.mjs: the client of bench/session (Node 20, no dependencies). One chat
// of --turns turns (default 5) against a server just started (no warm-up: the first minute is
// what it measures): each turn a streaming POST /v1/chat/completions of the whole history (a
// system message, the user messages and the answers so far), temperature 0, ignore_eos,
// --max-tokens (32) an answer. Per turn: TTFT (request sent -> the first content), the decode
// rate (tokens 2..N over the time from the first to the last), the turn's wall time and the
// prompt's tokens; and the whole session's time. JSON on stdout.
//
//   node bench/session-client.mjs --url URL [--turns 5] [--max-tokens 32] [--timeout 600]
const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : dflt;
};
const url = opt('--url');
const turns = Number(opt('--turns', 5)), maxTokens = Number(opt('--max-tokens', 32));
const timeoutMs = Number(opt('--timeout', 600)) * 1000;
if (!url) {
    console.error('usage: node bench/session-client.mjs --url URL [--turns 5] [--max-tokens 32]');
    process.exit(2);
}
const questions = [
    'Tell me a story about a dog who finds a lost key in the park.',
    'What did the dog do with the key after that?',
    'Who owned the key, and how did they feel when it came back?',
    'Tell me what happened the next morning.',
    'How does the story end?',
];

// one streamed turn: {ttft, decode (tokens/s after the first), wall, tokens, prompt, text}
async function turn(messages) {
    const t0 = performance.now();
    const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
            stream_options: { include_usage: true } }),
        signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    const decoder = new TextDecoder();
    let buf = '', text = '', first = 0, last = 0, tokens = 0, prompt = null;
    for await (const chunk of res.body) {
        buf += decoder.decode(chunk, { stream: true });
        let at;
        while ((at = buf.indexOf('\n\n')) >= 0) {
            const event = buf.slice(0, at);
            buf = buf.slice(at + 2);
            if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
            const d = JSON.parse(event.slice(6));
            if (d.usage) prompt = d.usage.prompt_tokens;
            const delta = d.choices?.[0]?.delta?.content;
            if (typeof delta === 'string') {
                const now = performance.now();
                if (!first) first = now;
                last = now;
                tokens++;
                text += delta;
            }
        }
    }
    const end = performance.now();
    return { ttft: (first - t0) / 1000, decode: tokens > 1 ? (tokens - 1) / ((last - first) / 1000) : 0,
        wall: (end - t0) / 1000, tokens, prompt, text };
}

const t0 = performance.now();
const messages = [{ role: 'system', content: 'You are a storyteller who answers in short sentences.' }];
const out = [];
for (let k = 0; k < turns; k++) {
    messages.push({ role: 'user', content: questions[k % questions.length] });
    const r = await turn(messages);
    messages.push({ role: 'assistant', content: r.text });
    delete r.text;
    out.push(r);
    console.error(`  turn ${k + 1}: ttft ${r.ttft.toFixed(3)} s, decode ${r.decode.toFixed(1)} tok/s, ` +
        `prompt ${r.prompt}`);
}
console.log(JSON.stringify({ turns: out, session: (performance.now() - t0) / 1000 }));
