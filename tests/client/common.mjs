// tests/client/common.mjs: what the client test files share (Node's assert; no SDK of its own).
import assert from 'node:assert/strict';

// serverMetrics(metricsURL, apiKey): {metrics, gauge, waitForGauges} over the server's
// Prometheus page (behind the key too):
//   metrics(): its text;  gauge(text, name): a gauge's value, or undefined;
//   waitForGauges({name: value, ...}, ms = 5000): within ms every gauge at its value; returns
//   the last text.
export function serverMetrics(metricsURL, apiKey) {
    async function metrics() {
        const r = await fetch(metricsURL, { headers: { Authorization: `Bearer ${apiKey}` } });
        assert.equal(r.status, 200, `GET ${metricsURL}: ${r.status}`);
        return r.text();
    }
    function gauge(text, name) {
        const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
        return m ? Number(m[1]) : undefined;
    }
    async function waitForGauges(want, ms = 5000) {
        const deadline = Date.now() + ms;
        for (;;) {
            const text = await metrics();
            if (Object.entries(want).every(([k, v]) => gauge(text, k) === v)) return text;
            if (Date.now() > deadline) {
                const got = Object.keys(want).map((k) => `${k} ${gauge(text, k)}`).join(', ');
                assert.fail(`after ${ms} ms: ${got}; expected ${JSON.stringify(want)}`);
            }
            await new Promise((r) => setTimeout(r, 50));
        }
    }
    return { metrics, gauge, waitForGauges };
}

// rejection(promise, Class, Base): the error the promise rejects with, asserted to be an
// instance of Class and of the SDK's Base (its APIError).
export async function rejection(promise, Class, Base) {
    let err;
    try {
        await promise;
    } catch (e) {
        err = e;
    }
    assert.ok(err, `expected ${Class.name}, but the request succeeded`);
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err?.constructor?.name}: ${err?.message}`);
    assert.ok(err instanceof Base);
    return err;
}

// expectOpenAIError(OpenAI, promise, Class, fields): the promise rejects with an instance of
// Class (an OpenAI.APIError subclass) whose status, param, code and type are as given
// (undefined: not checked); err.error, the body's "error" object, is OpenAI's {message, type,
// param, code}, and err.message starts with the status. Returns the error.
export async function expectOpenAIError(OpenAI, promise, Class, fields = {}) {
    const err = await rejection(promise, Class, OpenAI.APIError);
    for (const [k, v] of Object.entries(fields)) {
        assert.equal(err[k], v, `err.${k} = ${JSON.stringify(err[k])}, expected ${JSON.stringify(v)} (${err.message})`);
    }
    assert.equal(typeof err.error, 'object', `err.error = ${JSON.stringify(err.error)}`);
    assert.equal(typeof err.error.message, 'string');
    assert.ok(err.error.message.length > 0, 'the error says what is wrong');
    assert.equal(err.error.type, err.type);
    assert.ok('param' in err.error, 'error.param is present (null when none)');
    assert.ok('code' in err.error, 'error.code is present (null when none)');
    assert.match(err.message, new RegExp(`^${err.status} `));
    return err;
}

// eventNames(events): the names of [{event}] in order, a run of one name as "name xN"
// (for failure messages)
export function eventNames(events) {
    const runs = [];
    for (const { event } of events) {
        if (runs.at(-1)?.[0] === event) runs.at(-1)[1]++;
        else runs.push([event, 1]);
    }
    return runs.map(([name, n]) => (n > 1 ? `${name} x${n}` : name)).join(', ');
}
