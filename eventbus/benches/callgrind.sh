#!/usr/bin/env bash
# Instructions per delivery, eventbus against the hand-made floor, counted by callgrind: a
# number that does not move with the machine's load. Judge a change by it, then confirm it
# with wall time (`cargo bench -p eventbus --bench throughput`).
#
#   eventbus/benches/callgrind.sh                        the table
#   eventbus/benches/callgrind.sh --annotate eventbus-1  where that scenario's instructions go
#   eventbus/benches/callgrind.sh eventbus-1 hand-1      the table for some scenarios only
#   eventbus/benches/callgrind.sh --publisher            the publishing thread alone, per
#                                                        publish, log and mailbox topics
#                                                        at 1, 4, 16 and 64 subscribers
#
# Every scenario (`benches/instructions.rs`) runs twice under
# `valgrind --tool=callgrind --separate-threads=no` (all threads in one count): with 0
# messages and with N (env `N`, default 50,000). The set-up is the same, so
#   per delivery = (Ir(N) − Ir(0)) / (N × subscribers)     (per publish with no subscriber).
#
# With --publisher, `--separate-threads=yes` and only the publishing (main) thread's count:
#   per publish = (Ir_main(N) − Ir_main(0)) / N.
#
# FEATURES=tokio measures with those features of eventbus on.
# Needs valgrind (Debian package `valgrind`) and cargo; installs nothing. Outputs go to
# $CARGO_TARGET_DIR/callgrind/ (default target/callgrind/).
set -euo pipefail

N=${N:-50000}
TOP=${TOP:-20}
ALL=(eventbus-1 hand-1 eventbus-4 hand-4 eventbus-0 lock-0)
PUBLISHER=(log-1 log-4 log-16 log-64 eventbus-1 eventbus-4 eventbus-16 eventbus-64)
KNOWN=(async-0 async-1 ready-0 task-1 task-4 tokio-hand-1 tokio-hand-4 eventbus-0 eventbus-1 eventbus-4 eventbus-16 eventbus-64 hand-1 hand-4 lock-0
    log-1 log-4 log-16 log-64 priority-1 priority-4 bus-1 bus-4 bus-16)

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

annotate=""
publisher=""
scenarios=()
while [ $# -gt 0 ]; do
    case "$1" in
        --annotate) annotate=${2:?"--annotate needs a scenario: ${KNOWN[*]}"}; shift 2 ;;
        --publisher) publisher=1; shift ;;
        -h|--help) usage 0 ;;
        -*) echo "unknown option $1" >&2; usage 2 ;;
        *) scenarios+=("$1"); shift ;;
    esac
done
if [ ${#scenarios[@]} -eq 0 ]; then
    if [ -n "$publisher" ]; then scenarios=("${PUBLISHER[@]}"); else scenarios=("${ALL[@]}"); fi
fi
[ -z "$annotate" ] || scenarios=("$annotate")
for s in "${scenarios[@]}"; do
    case " ${KNOWN[*]} " in
        *" $s "*) ;;
        *) echo "unknown scenario $s; expected one of: ${KNOWN[*]}" >&2; exit 2 ;;
    esac
done

missing=0
for tool in valgrind callgrind_annotate; do
    if ! command -v "$tool" >/dev/null; then
        echo "needs $tool (Debian package valgrind)" >&2
        missing=1
    fi
done
command -v cargo >/dev/null || { echo "needs cargo (https://rustup.rs)" >&2; missing=1; }
[ $missing -eq 0 ] || exit 2

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/callgrind
mkdir -p "$out"

echo "load at start: $(uptime)"
echo "$(valgrind --version); $(rustc --version); N = $N"
echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"

# Release code with symbols and line tables, so callgrind can name functions and files;
# the profile in Cargo.toml is left as it is.
build_log=$out/build.json
CARGO_PROFILE_BENCH_DEBUG=true cargo bench -p eventbus --bench instructions --no-run ${FEATURES:+--features "$FEATURES"} \
    --message-format=json-render-diagnostics >"$build_log"
bin=$(grep '"executable":"[^"]' "$build_log" | grep '"name":"instructions"' |
    sed 's/.*"executable":"\([^"]*\)".*/\1/' | tail -n 1)
[ -x "$bin" ] || { echo "could not find the instructions bench in $build_log" >&2; exit 1; }

subscribers() { case "$1" in *-0) echo 1 ;; *) echo "${1##*-}" ;; esac; }

# Runs one scenario with `$2` messages under callgrind; prints its total Ir.
measure() {
    local file=$out/callgrind.out.$1.$2
    if [ -n "$publisher" ]; then
        # One file per thread, `-01` the main thread: the one that publishes.
        rm -f "$file"-*
        valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$file" \
            --log-file="$out/valgrind.$1.$2.log" "$bin" "$1" "$2" >/dev/null
        file=$file-01
    else
        valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$file" \
            --log-file="$out/valgrind.$1.$2.log" "$bin" "$1" "$2" >/dev/null
    fi
    # `totals:` when present, else `summary:` (the same number for one event, Ir).
    awk '/^totals:/ { t = $2 } /^summary:/ { s = $2 } END { print (t != "" ? t : s) }' "$file"
}

if [ -n "$annotate" ]; then
    s=$annotate
    k=$(subscribers "$s")
    per=$((N * k))
    measure "$s" 0 >/dev/null
    measure "$s" "$N" >/dev/null
    # Self cost, all threads: the N run less the 0 run, divided by N × subscribers, is what
    # each function spends per delivery. callgrind names the compiled function and the source
    # file of each line, so code inlined from mailbox.rs into topic.rs's publish shows as
    # `mailbox.rs:...TopicState::publish`: three views of the same counts.
    for n in 0 "$N"; do
        callgrind_annotate --auto=no --inclusive=no --threshold=100 \
            "$out/callgrind.out.$s.$n" >"$out/annotate.$s.$n.txt"
    done
    echo
    echo "$s: self cost per delivery, (Ir(N) − Ir(0)) / ($N × $k), all threads"
    echo "(listings: $out/annotate.$s.{0,$N}.txt)"
    for view in function file file:function; do
        awk -v per="$per" -v top="$TOP" -v view="$view" '
            FNR == 1 { run++; listing = 0 }
            / file:function *$/ { listing = 1; next }
            # "  1,234 (12.3%)  file:function [object]"
            listing && /^ *[0-9][0-9,]* / {
                ir = $1; gsub(/,/, "", ir)
                line = $0
                sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", line)
                sub(/ \[[^]]*\]$/, "", line)
                c = index(line, ":")
                file = substr(line, 1, c - 1); fn = substr(line, c + 1)
                sub(/^.*\/work\/[^\/]*\//, "", file)
                sub(/^.*\/registry\/src\/[^\/]*\//, "", file)
                sub(/^\/rustc\/[0-9a-f]*\/library\//, "std:", file)
                key = view == "function" ? fn : view == "file" ? file : file ":" fn
                cost[run, key] += ir; keys[key] = 1
            }
            END {
                n = 0; total = 0
                for (k in keys) {
                    d = cost[2, k] - cost[1, k]; total += d
                    if (d > 0) { delta[k] = d; order[++n] = k }
                }
                for (i = 2; i <= n; i++) {
                    v = order[i]; j = i - 1
                    while (j > 0 && delta[order[j]] < delta[v]) { order[j + 1] = order[j]; j-- }
                    order[j + 1] = v
                }
                printf "\n%9s %6s  by %s\n", "Ir/deliv", "share", view
                for (i = 1; i <= n && i <= top; i++)
                    printf "%9.1f %5.1f%%  %s\n", delta[order[i]] / per, 100 * delta[order[i]] / total, order[i]
                printf "%9.1f %5.1f%%  (total)\n", total / per, 100
            }' "$out/annotate.$s.0.txt" "$out/annotate.$s.$N.txt"
    done
    echo
    echo "load at end: $(uptime)"
    exit 0
fi

if [ -n "$publisher" ]; then
    printf "\n%-12s %14s %14s %12s\n" scenario "main Ir(0)" "main Ir(N=$N)" "per publish"
    for s in "${scenarios[@]}"; do
        zero=$(measure "$s" 0)
        full=$(measure "$s" "$N")
        printf "%-12s %14s %14s %12s\n" "$s" "$zero" "$full" \
            "$(awk -v a="$zero" -v b="$full" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')"
    done
    echo
    echo "callgrind files: $out/callgrind.out.SCENARIO.{0,$N}-01 (the main thread)"
    echo "load at end: $(uptime)"
    exit 0
fi

declare -A per_delivery
printf "\n%-12s %14s %14s %12s\n" scenario "Ir(0)" "Ir(N=$N)" "per deliv"
for s in "${scenarios[@]}"; do
    k=$(subscribers "$s")
    zero=$(measure "$s" 0)
    full=$(measure "$s" "$N")
    per_delivery[$s]=$(awk -v a="$zero" -v b="$full" -v d=$((N * k)) 'BEGIN { printf "%.1f", (b - a) / d }')
    printf "%-12s %14s %14s %12s\n" "$s" "$zero" "$full" "${per_delivery[$s]}"
done

ratio() {
    if [ -n "${per_delivery[$2]:-}" ] && [ -n "${per_delivery[$3]:-}" ]; then
        awk -v a="${per_delivery[$2]}" -v b="${per_delivery[$3]}" -v t="$1" \
            'BEGIN { printf "%-42s %8.1f vs %6.1f  %5.2fx\n", t, a, b, a / b }'
    fi
}
echo
ratio "1 → 1, per delivery, eventbus/hand" eventbus-1 hand-1
ratio "1 → 4, per delivery, eventbus/hand" eventbus-4 hand-4
ratio "no subscriber, per publish, eventbus/lock" eventbus-0 lock-0
echo
echo "callgrind files: $out/callgrind.out.SCENARIO.{0,$N}"
echo "load at end: $(uptime)"
