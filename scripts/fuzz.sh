#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harnesses of Tests/Fuzz with -sanitize=fuzzer,address and runs each for a
# bounded time, starting from the committed seeds (Tests/Fuzz/Corpus/<target>) and the inputs of earlier findings
# (Tests/Fuzz/Regressions/<target>). New interesting inputs go to .build-fuzz/corpus/<target> (kept between runs,
# never committed); a crash, timeout or broken invariant leaves its input in .build-fuzz/artifacts/<target>/.
# Prints per target executions, exec/s, coverage and the verdict, writes .build-fuzz/fuzz-summary.txt, and exits
# non-zero when any target found something.
#
#   FUZZ_SECONDS=60                              time per target (libFuzzer -max_total_time)
#   FUZZ_TARGETS="envelope token-verifier validators"   which targets to run
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-envelope token-verifier validators}
scratch=$PWD/.build-fuzz
summary=$scratch/fuzz-summary.txt
build=(swift build -c debug --package-path Tests/Fuzz --scratch-path "$scratch"
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)

# Largest input libFuzzer generates, per target: an event must reach the 16 KiB body limit (and its base64 form);
# a token just past the 8 KiB token limit; a body of a few KiB exercises every validator.
max_len() {
    case $1 in
        envelope) echo 32768 ;;
        token-verifier) echo 8300 ;;
        *) echo 8192 ;;
    esac
}

echo "== building the fuzz harnesses (.build-fuzz)"
mkdir -p "$scratch"
# gold warns once per ASan symbol it cannot export; that is noise, not a problem with the build.
if ! "${build[@]}" >"$scratch/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$scratch/build.log" | tail -40
    echo "fuzz: build failed (full log: $scratch/build.log)" >&2
    exit 1
fi
bin=$("${build[@]}" --show-bin-path)

{
    echo "make fuzz, $(date -u +%Y-%m-%dT%H:%M:%SZ), ${seconds}s per target"
    printf '%-15s %10s %8s %6s %6s %8s  %s\n' target execs exec/s cov ft seconds result
} >"$summary"

# A trap (fatalError, an overflow) is libFuzzer's to report. Swift's own backtracer would run first, and trips
# AddressSanitizer while it reads the crashed process's stack, hiding the real finding.
export SWIFT_BACKTRACE=enable=no

failed=0
for target in $targets; do
    corpus=$scratch/corpus/$target
    artifacts=$scratch/artifacts/$target
    log=$scratch/logs/$target.log
    seeds=Tests/Fuzz/Corpus/$target
    regressions=Tests/Fuzz/Regressions/$target
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "$regressions"
    echo "== fuzzing $target for ${seconds}s (log: $log)"
    started=$(date +%s)
    status=0
    # Tokens of the input's grammar (JSON members, routes, base64url JWS headers) that mutation rarely invents.
    dict=()
    [ -f "Tests/Fuzz/Dictionaries/$target.dict" ] && dict=(-dict="Tests/Fuzz/Dictionaries/$target.dict")
    # The scratch corpus comes first: libFuzzer adds new inputs to the first directory only.
    "$bin/$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len="$(max_len "$target")" \
        "${dict[@]}" -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds" "$regressions" \
        >"$log" 2>&1 || status=$?
    elapsed=$(($(date +%s) - started))

    # A run that stops at once has no stats or coverage lines: the greps may find nothing.
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$( (grep -Eo 'cov: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
    ft=$( (grep -Eo 'ft: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ "$status" -eq 0 ]; then
        result="no crash"
    else
        failed=1
        reason=$(grep -Eom1 'invariant violated: .*|ERROR: (libFuzzer|AddressSanitizer): [a-z-]+|Fatal error: .*' "$log" || true)
        result="FOUND (exit $status): ${reason:-see log} -> ${artifact:-no artifact written}"
    fi
    printf '%-15s %10s %8s %6s %6s %8s  %s\n' "$target" "${execs:--}" "${rate:--}" "${cov:--}" "${ft:--}" \
        "$elapsed" "$result" | tee -a "$summary"
    if [ "$status" -ne 0 ]; then
        (grep -E 'invariant violated|ERROR:|Fatal error|SUMMARY|Test unit written' "$log" || true) | head -20 |
            sed 's/^/    /'
    fi
done

echo "== summary: $summary"
cat "$summary"
if [ "$failed" -ne 0 ]; then
    echo "fuzz: a target found a crash, timeout or broken invariant. Reproduce: $bin/<target> <artifact>;" \
        "keep the input in Tests/Fuzz/Regressions/<target>/ once fixed." >&2
    exit 1
fi
