#!/usr/bin/env bash
# Where a cold push-register's time goes, against the C floors: prints a markdown section on stdout that the bench
# (Tests/Benchmarks/StartupBenchmark.swift) puts in docs/benchmarks.md. Counts, not seconds, wherever a tool gives
# them: they hold on a shared, noisy machine.
#
#   scripts/bench-startup-profile.sh OURS FLOOR TRIVIAL EVENT_FILE
#
# OURS is the shipped push-register (an unzipped dist/lambda zip's bootstrap), FLOOR the C register program, TRIVIAL
# the trivial C program (Tests/Benchmarks/c), EVENT_FILE a valid push-register event. The environment must hold what
# the functions need (DATABASE_URL, SUPABASE_JWT_SECRET, ...): the bench passes its own function environment.
#
#   1. the shared libraries each loads (ldd);
#   2. the dynamic loader's own work with an empty stdin (LD_DEBUG=statistics: cycles, relocations);
#   3. system calls of one registration (strace -c -f), and its phases on a strace timeline;
#   4. instructions: perf stat when this machine's perf counts them, else valgrind's callgrind (exact, repeatable
#      counts), with the functions of push-register's start-up that execute the most;
#   5. (with callgrind) every instruction of one registration by category, against the C floor
#      (scripts/bench-startup-attribution.py), in milliseconds with BENCH_PROFILE_FIGURES.
# No pipefail: the bench ignores SIGPIPE and its children inherit that, so a reader that stops early (sed -n) would
# make a writer fail; every pipeline here reads its input to the end.
set -eu
ours=${1:?usage: bench-startup-profile.sh OURS FLOOR TRIVIAL EVENT_FILE}
floor=${2:?}
trivial=${3:?}
event=${4:?}
work=$(mktemp -d /tmp/caregiver-push-startup-profile.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo
echo "The rest is made by \`scripts/bench-startup-profile.sh\` in the same run (push-register is"
echo "\`$(echo "$ours" | sed "s#^$PWD/##")\`; \`c/register\` and \`c/trivial\` as the bench built them)."

# 1. Libraries.
libraries() { ldd "$1" | awk '$1 !~ /^linux-vdso/ {print $1}' | sed 's#.*/##'; }
echo
echo "**Shared libraries loaded** (\`ldd\`, the whole closure):"
echo
echo "| program | libraries | which |"
echo "|---|---:|---|"
for pair in "push-register:$ours" "c/register:$floor" "c/trivial:$trivial"; do
    name=${pair%%:*}
    path=${pair#*:}
    list=$(libraries "$path")
    echo "| $name | $(echo "$list" | grep -c .) | $(echo "$list" | sed 's/\.so.*//' | sort | tr '\n' ' ' | sed 's/ $//') |"
done

# 2. The dynamic loader, empty stdin, median of 5 runs of each.
loader() {
    local path=$1 run
    for run in 1 2 3 4 5; do
        LD_DEBUG=statistics LD_DEBUG_OUTPUT="$work/ld.$run" "$path" </dev/null >/dev/null 2>&1 || true
        # LD_DEBUG_OUTPUT appends the pid to the name.
        cat "$work"/ld."$run".* | awk '
            /total startup time in dynamic loader/ {total = $(NF-1)}
            /time needed for relocation/ {reloc = $(NF-2)}
            /time needed to load objects/ {load = $(NF-2)}
            /number of relocations:/ {relocations = $NF}
            /number of relocations from cache/ {cache = $NF}
            /number of relative relocations/ {relative = $NF}
            END {print total, reloc, load, relocations, cache, relative}'
        rm -f "$work"/ld."$run".*
    done | sort -n -k1,1 | sed -n 3p
}
echo
echo "**The dynamic loader** with an empty stdin (\`LD_DEBUG=statistics\`, the run with the median total of 5):"
echo
echo "| program | loader cycles | relocation cycles | loading objects cycles | relocations | from cache | relative relocations |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pair in "push-register:$ours" "c/register:$floor" "c/trivial:$trivial"; do
    read -r total reloc load relocations cache relative <<<"$(loader "${pair#*:}")"
    echo "| ${pair%%:*} | $total | $reloc | $load | $relocations | $cache | $relative |"
done

# 3. System calls of one registration.
if command -v strace >/dev/null 2>&1; then
    for pair in "ours:$ours" "floor:$floor"; do
        strace -f -c -o "$work/strace.${pair%%:*}" "${pair#*:}" <"$event" >/dev/null 2>&1 || true
        strace -f -ttt -o "$work/timeline.${pair%%:*}" "${pair#*:}" <"$event" >/dev/null 2>&1 || true
    done
    echo
    echo "**System calls of one registration** (\`strace -c -f\`, the register event; the twelve push-register makes most"
    echo "often, and the totals):"
    echo
    echo "| system call | push-register | c/register |"
    echo "|---|---:|---:|"
    # strace -c columns: % time, seconds, usecs/call, calls, [errors], syscall.
    awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $4, $NF}' "$work/strace.ours" | sort -rn | sed -n 1,12p |
        while read -r n name; do
            echo "| $name | $n | $(awk -v name="$name" '$NF == name && !done {print $4; done = 1}' "$work/strace.floor") |"
        done
    echo "| **total** | **$(awk '$NF == "total" {print $4}' "$work/strace.ours")** | **$(awk '$NF == "total" {print $4}' "$work/strace.floor")** |"
    # The phases on a timeline (tracing inflates every system call, so read the shares, not the milliseconds):
    # exec → the database socket's connect → the response written to fd 1 → exit.
    phases() {
        awk '
            function ms(t) { return (t - start) * 1000 }
            NR == 1 {start = $2}
            /connect\(/ && /sin_port=htons\(/ && connect == "" {connect = $2}
            /connect\(/ && /sun_path=.*PGSQL/ && connect == "" {connect = $2}
            /(sendto|send)\(/ && connect != "" {sends++}
            /write\(1,/ && response == "" {response = $2}
            {last = $2}
            END {printf "%.1f %.1f %.1f %d\n", ms(connect), ms(response), ms(last), sends}' "$1"
    }
    echo
    echo "**Phases of one registration under \`strace -f -ttt\`** (ms after exec; tracing slows every system call, so"
    echo "compare the shares): before the database (loader, runtime, configuration, the token's check, the event),"
    echo "the database (connect, authentication, the statements: \`sendto\` calls after connect), the response."
    echo
    echo "| program | exec → connect | connect → response written | response → exit | sendto after connect |"
    echo "|---|---:|---:|---:|---:|"
    for pair in "push-register:ours" "c/register:floor"; do
        read -r connect response last sends <<<"$(phases "$work/timeline.${pair#*:}")"
        echo "| ${pair%%:*} | $connect | $(awk -v a="$connect" -v b="$response" 'BEGIN {printf "%.1f", b - a}') |" \
            "$(awk -v a="$response" -v b="$last" 'BEGIN {printf "%.1f", b - a}') | $sends |"
    done
fi

# 4. Instructions.
echo
if perf stat -e instructions true 2>&1 | grep -q '<not supported>' || ! command -v perf >/dev/null 2>&1; then
    echo "**Instructions** (\`perf stat -e instructions true\` answers \"not supported\" on this machine, so"
    echo "\`valgrind --tool=callgrind\`: exact counts of instructions executed, whole process, loader included):"
    echo
    if command -v valgrind >/dev/null 2>&1; then
        instructions() {
            valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.$2" "$1" <"$3" >/dev/null 2>"$work/valgrind.log" || true
            awk '/^(summary|totals):/ {print $2; exit}' "$work/callgrind.$2"
        }
        empty_ours=$(instructions "$ours" empty-ours /dev/null)
        empty_trivial=$(instructions "$trivial" empty-trivial /dev/null)
        register_ours=$(instructions "$ours" register-ours "$event")
        register_floor=$(instructions "$floor" register-floor "$event")
        # Inclusive instructions under ld.so's _dl_start: the loader's own work before main (mapping, relocation).
        loader_share() {
            callgrind_annotate --inclusive=yes "$work/callgrind.$1" 2>/dev/null |
                awk '/rtld.c:_dl_start / && !done {gsub(",", "", $1); print $1; done = 1}'
        }
        echo "| run | instructions | in the loader (\`_dl_start\`, inclusive) | × the C program's instructions |"
        echo "|---|---:|---:|---:|"
        for row in "push-register, empty stdin:empty-ours:$empty_ours:$empty_trivial" \
            "c/trivial, empty stdin:empty-trivial:$empty_trivial:$empty_trivial" \
            "push-register, register event:register-ours:$register_ours:$register_floor" \
            "c/register, register event:register-floor:$register_floor:$register_floor"; do
            IFS=: read -r name file count base <<<"$row"
            loader=$(loader_share "$file")
            echo "| $name | $count | ${loader:-?} ($(awk -v a="${loader:-0}" -v b="$count" 'BEGIN {printf "%.0f%%", 100 * a / b}')) |" \
                "$(awk -v a="$count" -v b="$base" 'BEGIN {printf "%.1f", a / b}') |"
        done
        # The shipped bootstrap is stripped, so its own functions would show as bare addresses: the names come from
        # the same build unstripped (BENCH_PROFILE_SYMBOLS, the bench's "unstripped" lever), when there is one.
        named=empty-ours
        if [ -n "${BENCH_PROFILE_SYMBOLS:-}" ] && [ -x "$BENCH_PROFILE_SYMBOLS" ]; then
            instructions "$BENCH_PROFILE_SYMBOLS" empty-named /dev/null >/dev/null
            named=empty-named
        fi
        # 5. Every instruction of one registration by category, ours (named: the unstripped build when there is one)
        # against the fair C floor, through scripts/bench-startup-attribution.py; BENCH_PROFILE_FIGURES (the run's
        # medians: wall ms ours, floor; CPU ms ours, floor) turns the gap into milliseconds.
        attributed=$ours
        if [ -n "${BENCH_PROFILE_SYMBOLS:-}" ] && [ -x "$BENCH_PROFILE_SYMBOLS" ]; then
            attributed=$BENCH_PROFILE_SYMBOLS
        fi
        valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
            --callgrind-out-file="$work/attribution.ours" "$attributed" <"$event" >/dev/null 2>"$work/valgrind.log" || true
        valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
            --callgrind-out-file="$work/attribution.floor" "$floor" <"$event" >/dev/null 2>"$work/valgrind.log" || true
        echo
        echo "### Where the cold gap goes"
        echo
        echo "Every instruction of one registration (the register event, \`valgrind --tool=callgrind\`), push-register"
        echo "(\`$(echo "$attributed" | sed "s#^$PWD/##")\`, the shipped build before stripping, so that its own functions"
        echo "have names) against \`c/register\`, split by \`scripts/bench-startup-attribution.py\`: a function's own"
        echo "instructions go to its library's or module's category; glibc, libgcc, the Swift standard library, retain and"
        echo "release, and OpenSSL are charged to their callers up the call graph (OpenSSL keeps its own rows, by caller);"
        echo "JSON is every Swift function whose name says JSON. The milliseconds: the instruction gap at the floor's"
        echo "instructions per CPU ms, then the kernel's and the waiting's share of the measured gap, so that the rows add up"
        echo "to the cold gap of the table above."
        echo
        # shellcheck disable=SC2086
        python3 scripts/bench-startup-attribution.py "$work/attribution.ours" "$work/attribution.floor" \
            ${BENCH_PROFILE_FIGURES:-}
        echo
        echo "The fifteen functions where push-register's empty-stdin run executes the most instructions themselves"
        echo "(\`callgrind_annotate --inclusive=no\`, % of the whole run; names from the unstripped build when the"
        echo "bench has one, \`$(echo "${BENCH_PROFILE_SYMBOLS:-$ours}" | sed "s#^$PWD/##")\`):"
        echo
        echo '```'
        callgrind_annotate --inclusive=no "$work/callgrind.$named" 2>/dev/null |
            awk '/^-+$/ {rule++; next} rule >= 4 && $1 ~ /^[0-9,]+$/ && !/PROGRAM TOTALS/' | sed -n 1,15p | cut -c1-160
        echo '```'
    else
        echo "valgrind is not installed."
    fi
else
    echo "**Instructions and time** (\`perf stat -r 20\`):"
    echo
    echo '```'
    for pair in "push-register (empty stdin):$ours:/dev/null" "c/trivial:$trivial:/dev/null" \
        "push-register (register):$ours:$event" "c/register:$floor:$event"; do
        IFS=: read -r name path input <<<"$pair"
        echo "$name:"
        # Through sh so that each of the 20 runs opens the input anew.
        perf stat -r 20 -e instructions,task-clock sh -c 'exec "$0" <"$1" >/dev/null' "$path" "$input" 2>&1 |
            awk '/instructions|task-clock/ {print "  " $0}'
    done
    echo '```'
fi
