// The URL a `snug serve --port 0` child prints on its "serving ... on URL" line, for the
// node:test files here (tests/lib/harness.mjs's Server does the same for the ok/FAIL tests).
// Rejects with the output's tail after 60 s, or when the server exits first.
export function servingBase(server) {
    let out = '';
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no serving line in 60 s: ${out.slice(-500)}`)), 60_000);
        server.stdout.on('data', (d) => {
            out += d;
            const m = /^serving .* on (http:\/\/[0-9.]+:\d+)/m.exec(out);
            if (m) { clearTimeout(timer); resolve(m[1]); }
        });
        server.once('exit', (code) => { clearTimeout(timer); reject(new Error(`snug serve exited ${code}: ${out}`)); });
    });
}

// Stops a `snug serve` child started by a test (SIGTERM, as an operator would) and waits for it
// to exit; nothing when it has exited already.
export async function stopServer(server) {
    if (!server || server.exitCode !== null) return;
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
}
