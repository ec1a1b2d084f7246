#!/usr/bin/env bash
# The README's examples, run: every indented block of README.md whose first line is
# "$ COMMAND" is run from the repository's root (with BUILD_DIR first on PATH, so that
# `snug` is build/snug) and what it prints, stdout and stderr together as a terminal shows
# them, is compared with the lines the README shows under the command. So a change that
# makes an example untrue fails here.
#
# How an example reads (the README says the same in its own words, under "Commands"):
#   $ COMMAND            a command; a line that ends in \ or leaves a ' open goes on below
#   text                 a line of output, compared exactly (trailing blanks aside; blank
#                        lines of the output, such as those between server-sent events, are
#                        not compared)
#   ...                  alone on a line: any number of lines left out
#   a ... b              within a line: any text left out (an id, a timestamp, a long tail)
#   ~0.21 GB/s           a figure or name marked ~ varies by machine or build (times, rates,
#                        the instruction set, thread counts, what the process's code and
#                        threads take, the commit): any number or word matches it
#   text\                an output line wrapped for the page: it goes on on the next line
#   $ CMD   # ...: not run by make test
#                        a comment on the command's line that ends so: the example needs
#                        what a test run has not (a 1B model, minutes); counted as skipped
# A block may hold several commands. `snug serve ... --port 8000` starts the server in the
# background on a free port instead (its output is compared up to its "serving ... on" line)
# and every later `localhost:8000` is sent to it, until a later serve example stops it and
# starts its own; the last is stopped at the end.
#
# Then claims of the README's prose that a test can check: the page's size, the version.
# Usage: tests/cli/readme.sh BUILD_DIR. Prints "ok - ..." / "FAIL - ..." lines, how many
# examples ran and were skipped, and a final "N passed, M failed" (see tests/run).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
readme=README.md
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill -KILL "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
passed=0 failed=0 ran=0 skipped=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "  $l"; done; failed=$((failed + 1)); }

# Splits the README into examples: $tmp/ex/N.cmd (the command as written), N.want (the
# lines shown under it, continuations joined, the block's indentation taken off) and
# N.line (the command's line number).
mkdir -p "$tmp/ex"
perl -e '
    my ($readme, $dir) = @ARGV;
    open(my $f, "<", $readme) or die "$readme: $!";
    my @lines = <$f>;
    chomp @lines;
    my ($n, $i) = (0, 0);
    sub put { my ($p, $t) = @_; open(my $o, ">", $p) or die; print $o $t; close $o; }
    while ($i < @lines) {
        # a command: an indented "$ " line
        if ($lines[$i] !~ /^( {4,})\$ (.*)$/) { $i++; next; }
        my ($ind, $cmd, $at) = ($1, $2, $i + 1);
        $i++;
        # the command goes on while its line ends in \ or a quote is open
        while ($i < @lines && ($cmd =~ /\\$/ || (($cmd =~ tr/\x27//) % 2))) {
            $cmd .= "\n" . $lines[$i];
            $i++;
        }
        # its output: the lines at the block indentation or deeper, up to a blank line,
        # a line less indented or the next command
        my @want;
        while ($i < @lines && $lines[$i] =~ /^\Q$ind\E/ && $lines[$i] !~ /^\Q$ind\E\$ /) {
            my $l = substr($lines[$i], length $ind);
            $i++;
            while ($l =~ /\\$/ && $i < @lines && $lines[$i] =~ /^\Q$ind\E/) {
                chop $l;
                $l .= substr($lines[$i], length $ind);
                $i++;
            }
            push @want, $l;
        }
        $n++;
        put("$dir/$n.cmd", $cmd);
        put("$dir/$n.want", join("", map { "$_\n" } @want));
        put("$dir/$n.line", $at);
    }
' "$readme" "$tmp/ex" || { fail "README examples parsed"; echo "0 passed, 1 failed"; exit 1; }

# match WANT GOT: GOT (a file) is what WANT (a file of the README's lines) shows, under the
# rules above; on a mismatch prints the first line of WANT it could not place.
match() {
    perl -e '
        my ($wf, $gf) = @ARGV;
        open(my $w, "<", $wf) or die; my @want = <$w>; chomp @want;
        open(my $g, "<", $gf) or die; my @got = <$g>; chomp @got;
        s/\s+$// for @want, @got;
        @got = grep { $_ ne "" } @got;
        # one line of the README as a pattern: ... any text, ~X any number or word
        sub pat {
            my $l = shift;
            my $p = "";
            for my $part (split /(\.\.\.|~[A-Za-z0-9_.,+-]*[A-Za-z0-9_])/, $l) {
                if ($part eq "...") { $p .= ".*?"; }
                elsif ($part =~ /^~./) { $p .= "[A-Za-z0-9_.,+-]+?"; }
                else { $p .= quotemeta $part; }
            }
            return qr/^$p$/;
        }
        my @pats = map { $_ eq "..." ? undef : pat($_) } @want;
        # match(i, j): want[i..] against got[j..]; a lone ... takes any number of lines
        my %seen;
        my $deepest = 0;
        sub m_ {
            my ($i, $j) = @_;
            $deepest = $i if $i > $deepest;
            return $j == @got if $i == @want;
            return 0 if $seen{"$i,$j"}++;
            if (!defined $pats[$i]) {
                for (my $k = $j; $k <= @got; $k++) { return 1 if m_($i + 1, $k); }
                return 0;
            }
            return $j < @got && $got[$j] =~ $pats[$i] && m_($i + 1, $j + 1);
        }
        exit 0 if m_(0, 0);
        print "first README line not matched: ", ($deepest < @want ? $want[$deepest] : "(the end: more output follows)"), "\n";
        exit 1;
    ' "$1" "$2"
}

# port: where the README's server listens (set when its serve example has started)
port=
run_example() {
    local n=$1 cmd line name want got rc
    cmd=$(cat "$tmp/ex/$n.cmd")
    line=$(cat "$tmp/ex/$n.line")
    name="README.md:$line \$ $(head -n1 <<<"$cmd" | cut -c1-90)"
    if [[ $(head -n1 <<<"$cmd") =~ \#.*not\ run\ by\ make\ test ]]; then
        echo "# skipped (marked): $name"
        skipped=$((skipped + 1))
        return
    fi
    ran=$((ran + 1))
    want="$tmp/ex/$n.want"
    got="$tmp/ex/$n.got"
    cmd=${cmd//build\/snug/$build\/snug}
    if [[ $cmd =~ (^|[[:space:]/])snug\ serve ]]; then
        # the server: on a free port, in the background, its output up to its serving line (a
        # later serve example stops the one before: every localhost:8000 after it is its own)
        if [[ -n $server_pid ]]; then
            kill -TERM "$server_pid" 2>/dev/null
            wait "$server_pid" 2>/dev/null
            server_pid=
        fi
        cmd=${cmd//--port 8000/--port 0}
        bash -c "exec $cmd" >"$tmp/server.out" 2>&1 &
        server_pid=$!
        local i
        for ((i = 0; i < 300; i++)); do
            grep -q '^serving .* on http://' "$tmp/server.out" && break
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        port=$(sed -n 's|^serving .* on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/server.out" | head -n1)
        if [[ -z $port ]]; then
            fail "$name" "no 'serving ... on http://127.0.0.1:PORT' line within 30 s" "$(tail -n 5 "$tmp/server.out")"
            return
        fi
        sed -n "1,/^serving .* on http:/p" "$tmp/server.out" | sed "s/127\.0\.0\.1:$port/127.0.0.1:8000/g" >"$got"
        rc=0
    else
        if [[ $cmd == *localhost:8000* || $cmd == *127.0.0.1:8000* ]]; then
            if [[ -z $port ]]; then
                fail "$name" "asks the server at localhost:8000, but no serve example started one before it"
                return
            fi
            cmd=${cmd//localhost:8000/127.0.0.1:$port}
            cmd=${cmd//127.0.0.1:8000/127.0.0.1:$port}
        fi
        PATH="$PWD/$build:$PATH" timeout -k 5 60 bash -o pipefail -c "$cmd" >"$got" 2>&1
        rc=$?
        [[ -n $port ]] && sed -i "s/127\.0\.0\.1:$port/127.0.0.1:8000/g" "$got"
    fi
    local why
    if [[ $rc -ne 0 ]]; then
        fail "$name" "exit status $rc" "$(head -n 20 "$got")"
    elif ! why=$(match "$want" "$got"); then
        fail "$name" "$why" "the README shows:" "$(sed 's/^/  | /' "$want" | head -n 30)" \
            "the command printed:" "$(sed 's/^/  | /' "$got" | head -n 30)"
    else
        ok "$name"
    fi
}

n_examples=$(find "$tmp/ex" -name '*.cmd' | wc -l)
for ((n = 1; n <= n_examples; n++)); do run_example "$n"; done
if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
fi
echo "# README examples: $ran run, $skipped skipped (marked: not run by make test)"
if [[ $ran -ge 10 ]]; then
    ok "README: $ran examples run, $skipped skipped"
else
    fail "README: $ran examples run, $skipped skipped" "fewer than 10 found: is the parser broken?"
fi

# --- claims of the prose -----------------------------------------------------------------
# "about N KB of HTML, CSS and JavaScript": the page's size within half a KB of N KB
page=src/server/page/index.html
kb=$(sed -n 's/.*`src\/server\/page\/index.html`, about \([0-9]*\) KB.*/\1/p' "$readme")
size=$(wc -c <"$page")
if [[ -n $kb ]] && ((size >= kb * 1000 - 500 && size < kb * 1000 + 500)); then
    ok "README: the page is about $kb KB ($size bytes)"
else
    fail "README: the page's size" "the README says about '${kb:-?}' KB; $page has $size bytes"
fi
# snug load: "at most 1.1% of the bundled model's" weights in pack slots, "within 1.07x" peak
for tp in 1 2; do
    if "$build/snug" load models/stories260K --tp "$tp" --json >"$tmp/load.json" 2>&1 &&
        jq -e '.pack_bytes <= 0.011 * .weight_bytes and .load_peak_bytes <= 1.07 * .weight_bytes' \
            "$tmp/load.json" >/dev/null; then
        ok "README: snug load of the bundled model at tp $tp: $(jq -r '"pack \(.pack_bytes * 10000 / .weight_bytes | round / 100)%, peak \(.load_peak_bytes * 10000 / .weight_bytes | round / 10000)x"' "$tmp/load.json")"
    else
        fail "README: snug load of the bundled model at tp $tp: pack <= 1.1%, peak <= 1.07x" "$(cat "$tmp/load.json")"
    fi
done
# "today X.Y.Z": the version snug.h says
v=$(sed -n 's/^#define SNUG_VERSION "\(.*\)"$/\1/p' include/snug.h)
if grep -qF "today $v;" "$readme"; then
    ok "README: SNUG_VERSION today $v"
else
    fail "README: SNUG_VERSION" "snug.h says $v; the README: $(grep -o 'today [0-9.]*' "$readme")"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
