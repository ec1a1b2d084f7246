# server.sh: what the HTTP tests of `snug serve` share (tests/server/*.sh). Source it from the
# repository's root with $snug set; it sets $tmp (removed at exit, with every server still
# running killed), ok / fail / summary (tests/run's lines), and the helpers below. Servers
# start with $serve_args (default: the bundled model's: --memory 256MiB --max-model-len 256
# --threads 1) before the test's own arguments.
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
passed=0 failed=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }
summary() { echo "$passed passed, $failed failed"; [[ $failed -eq 0 ]]; }

serve_args=${serve_args:---memory 256MiB --max-model-len 256 --threads 1}

# start_server NAME ARGS...: starts `snug serve` on port 0 and sets $pid and $url from its
# "serving ... on http://HOST:PORT" line (waiting up to 30 s); gives up the whole run if the
# line never comes.
start_server() {
    local name=$1; shift
    # shellcheck disable=SC2086 # the arguments are split on purpose
    "$snug" serve --port 0 $serve_args "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    pids+=("$pid")
    local i line
    for ((i = 0; i < 300; i++)); do
        line=$(grep -s -m1 '^serving .* on http://' "$tmp/$name.out")
        [[ -n $line ]] && break
        running "$pid" || break
        sleep 0.1
    done
    if [[ $line =~ on\ (http://[0-9.]+:[0-9]+) ]]; then
        url=${BASH_REMATCH[1]}
        ok "$name server started ($url)"
    else
        fail "$name server started" "no 'serving ... on http://' line within 30 s" \
            "$(tail -5 "$tmp/$name.out")" "$(tail -5 "$tmp/$name.err")"
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        forget "$pid"
        summary
        exit 1
    fi
}

# forget PID: a server reaped, not to be killed at the exit
forget() {
    local p keep=()
    for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    pids=("${keep[@]}")
}

# running PID: the process runs and is no zombie (an exited child not yet waited for still
# answers kill -0; /proc/PID/stat's third field says Z)
running() {
    local st
    read -r _ _ st _ 2>/dev/null <"/proc/$1/stat" || return 1
    [[ $st != Z && $st != X ]]
}

# stop_server NAME SIGNAL: sends SIGNAL to $pid; it must exit 0 within 10 s.
stop_server() {
    local name=$1 sig=$2 i rc
    kill -"$sig" "$pid"
    for ((i = 0; i < 100; i++)); do
        running "$pid" || break
        sleep 0.1
    done
    if running "$pid"; then
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        forget "$pid"
        fail "$name server exits 0 on SIG$sig within 10 s" "still running after 10 s; killed" \
            "$(tail -3 "$tmp/$name.err")"
        return
    fi
    wait "$pid"
    rc=$?
    forget "$pid"
    if [[ $rc -eq 0 ]]; then
        ok "$name server exits 0 on SIG$sig within 10 s ($((i / 10)).$((i % 10)) s)"
    else
        fail "$name server exits 0 on SIG$sig within 10 s" "exit status $rc" "$(tail -3 "$tmp/$name.err")"
    fi
}

# req PATH CURL_ARGS...: one request to $url/PATH; the body goes to $tmp/body and $status and
# $ctype are set ($status 000 when no answer came).
req() {
    local path=$1; shift
    local w
    : >"$tmp/body"
    w=$(curl -s --max-time 20 -o "$tmp/body" -w '%{http_code} %{content_type}' "$@" "$url$path")
    status=${w%% *}
    ctype=${w#* }
}
# post PATH JSON [CURL_ARGS...]: POST a JSON body.
post() {
    local path=$1 body=$2; shift 2
    req "$path" -H 'Content-Type: application/json' --data-binary "$body" "$@"
}
body() { head -c 1500 "$tmp/body"; }

# check_error NAME STATUS PARAM CODE: the last answer was STATUS, application/json, and an
# OpenAI error: error.message a non-empty string, error.type a string, error.param and error.code
# the JSON values PARAM and CODE (null or a quoted string).
check_error() {
    local name=$1 want=$2 param=$3 code=$4
    if [[ $status != "$want" ]]; then
        fail "$name" "HTTP $status, expected $want" "$(body)"
    elif [[ $ctype != application/json* ]]; then
        fail "$name" "Content-Type '$ctype', expected application/json" "$(body)"
    elif ! jq -e --argjson p "$param" --argjson c "$code" \
        '(.error.message | type == "string" and length > 0) and (.error.type | type == "string")
         and .error.param == $p and .error.code == $c' "$tmp/body" >/dev/null 2>&1; then
        fail "$name" "error shape: expected param $param, code $code" "$(body)"
    else
        ok "$name"
    fi
}
