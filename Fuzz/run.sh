#!/usr/bin/env bash
# Runs the libFuzzer targets of webauthn-fuzz (see Docs/Fuzzing.md).
#
#   Fuzz/run.sh [-s SECONDS] [-j JOBS] [TARGET ...]
#
# Each target runs for SECONDS (default 10) from its seeds (Fuzz/Corpus/TARGET), its
# recorded findings (TestVectors/negative/fuzz/TARGET) and its working corpus
# (.build-fuzz/corpus/TARGET, kept between runs, not committed). JOBS targets run
# at once (default: the number of cores). Without TARGET, every target runs.
# A crash, a sanitizer report, a leak or a timeout fails the run; the input is
# saved under .build-fuzz/findings/ and the command to reproduce it is printed.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=10
jobs=$(nproc 2>/dev/null || echo 2)
while getopts "s:j:" opt; do
  case $opt in
    s) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) echo "usage: Fuzz/run.sh [-s SECONDS] [-j JOBS] [TARGET ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

bin=${FUZZ_BIN:-.build-fuzz/debug/webauthn-fuzz}
[ -x "$bin" ] || { echo "no $bin: run make fuzz-build first" >&2; exit 2; }
export SWIFT_BACKTRACE=enable=no  # the Swift runtime's backtracer would hold the crash; libFuzzer and ASan report it
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <("$bin" --list | cut -f1)

work=.build-fuzz
mkdir -p "$work/logs" "$work/findings"

run_one() {
  local t=$1 seconds=$2 bin=$3 work=$4
  local corpus="$work/corpus/$t" log="$work/logs/$t.log"
  mkdir -p "$corpus"
  local dirs=("$corpus" "Fuzz/Corpus/$t")
  [ -d "TestVectors/negative/fuzz/$t" ] && dirs+=("TestVectors/negative/fuzz/$t")
  local dict=()
  case $t in
    json|client-data|safetynet-payload|metadata-payload|registration|authentication) dict=(-dict=Fuzz/Dictionaries/json.dict) ;;
    safetynet-jws|metadata-blob) dict=(-dict=Fuzz/Dictionaries/jws.dict) ;;
    base64url|der|android-key-description|x509|crl) ;;
    *) dict=(-dict=Fuzz/Dictionaries/cbor.dict) ;;
  esac
  FUZZ_TARGET=$t "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$work/findings/$t-" "${dict[@]}" "${dirs[@]}" >"$log" 2>&1
  local rc=$?
  local runs cov
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -oE '(DONE|#[0-9]+).*cov: [0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+')
  if [ $rc -eq 0 ]; then
    printf '%-24s ok      %8s runs  cov %s\n' "$t" "${runs:-?}" "${cov:-?}"
  else
    printf '%-24s FAILED  (exit %s) log: %s\n' "$t" "$rc" "$log"
    grep -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|Fatal error|fuzz property violated|SUMMARY' "$log" | head -5 | sed 's/^/    /'
    grep -E '^ +#[0-9]+ .* in ' "$log" | grep -vE 'libFuzzer|fuzzer::|__sanitizer|libc\.so|_assertionFailure|swift_|asan_' | head -6 | sed 's/^/    /'
    local artifact
    artifact=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    [ -n "$artifact" ] && echo "    input: $artifact  reproduce: FUZZ_TARGET=$t $bin $artifact"
  fi
  return $rc
}
export -f run_one

echo "fuzzing ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
start=$(date +%s)
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$seconds" "$bin" "$work"
status=$?
echo "fuzzing took $(( $(date +%s) - start ))s"
[ $status -eq 0 ] || { echo "fuzzing found a problem (see above)"; exit 1; }
