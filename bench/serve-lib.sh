# bench/serve-lib.sh: starting and stopping snug serve for the benches that source it
# (bench/session, bench/quant). Needs $tmp (a scratch folder) and curl; sets server_pid and
# port. Not a bench of its own.

# serve_start LABEL MODEL ARGS...: starts `build/snug serve MODEL ARGS... --port 0` (stdout and
# stderr into $tmp/LABEL.out and .err) and waits until /health answers 200; exits the bench
# with the server's last lines if it ends first.
serve_start() {
    local label=$1 i
    shift
    build/snug serve "$@" --port 0 >"$tmp/$label.out" 2>"$tmp/$label.err" &
    server_pid=$!
    port=
    for ((i = 0; i < 12000; i++)); do
        port=$(sed -n 's|^serving .* on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/$label.out" | head -n1)
        [[ -n $port ]] && curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200 && return 0
        kill -0 "$server_pid" 2>/dev/null || { tail -5 "$tmp/$label.err" >&2; server_pid=; exit 1; }
        sleep 0.05
    done
    echo "snug serve $1: not ready in 10 minutes" >&2
    exit 1
}

# serve_stop: SIGTERM, and waits for the server to end.
serve_stop() {
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}
