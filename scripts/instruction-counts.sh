#!/usr/bin/env bash
# Counts the instructions that Tally builds execute on the Are We Fast Yet benchmarks, under
# valgrind's cachegrind (no cache simulation), and prints each build's count relative to the
# first build's, per benchmark and as a geometric mean.
#
#   scripts/instruction-counts.sh SOM_CHECKOUT NAME=TALLY_BINARY [NAME=TALLY_BINARY ...]
#
# Why: a cost of 1 % or less (profiling hooks, a trigger) cannot be bounded by timing on a
# noisy machine, where identical runs spread far more than that. Instruction counts repeat to
# about one part in 100,000 (BENCHMARKS.md, "Method"), so they show what a change costs
# in work done. They are not
# time (a cache miss costs more than an add), so they support a timing with `tally bench`
# and do not replace it.
#
# SOM_CHECKOUT is a checkout of SOM-st/SOM (not part of this repository). Sizes come from
# bench/awfy.toml; ITERATIONS (default 1) sets the harness's outer count for every benchmark.
# Every build runs with the same fixed heap (HEAP, default 256M) so that no collection depends
# on timing, and with GC_THREADS=1 so that the collector's work does not depend on scheduling.
# Every build runs interpreted (TIER, default interp): the adaptive tier's decisions follow
# timer samples, so its counts would not repeat. BENCHMARKS (comma-separated) picks a subset. A run under valgrind is 20-50x slower than
# native: all 14 benchmarks at one iteration take about 4 minutes per build on a 2.5 GHz core.
set -euo pipefail
usage="usage: $0 SOM_CHECKOUT NAME=TALLY_BINARY [NAME=TALLY_BINARY ...]"
som=$(realpath "${1:?$usage}")
shift
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 2; }
suite="$(dirname "$0")/../bench/awfy.toml"
[ -f "$suite" ] || { echo "$0: cannot find $suite" >&2; exit 2; }
awfy="$som/Examples/AreWeFastYet"
[ -d "$awfy" ] || { echo "$0: $som has no Examples/AreWeFastYet" >&2; exit 2; }
cp="$awfy:$awfy/Core:$awfy/CD:$awfy/DeltaBlue:$awfy/Havlak:$awfy/Json:$awfy/NBody:$awfy/Richards:$som/Smalltalk"
iterations=${ITERATIONS:-1}
heap=${HEAP:-256M}

names=()
binaries=()
for build in "$@"; do
  name=${build%%=*}
  binary=${build#*=}
  [ "$name" != "$build" ] && [ -n "$name" ] || { echo "$0: '$build' is not NAME=TALLY_BINARY" >&2; exit 2; }
  [ -x "$binary" ] || { echo "$0: $binary is not an executable" >&2; exit 2; }
  names+=("$name")
  binaries+=("$(realpath "$binary")")
done

# name inner, one line per benchmark of the suite file, in its order.
benchmarks=$(awk '
  /^\[\[benchmark\]\]/ { if (name != "") print name, inner; name = ""; inner = 1 }
  /^name *=/ && in_bench { gsub(/[" ]/, "", $3); name = $3 }
  /^inner *=/ && in_bench { inner = $3 }
  /^\[\[benchmark\]\]/ { in_bench = 1 }
  END { if (name != "") print name, inner }' "$suite")
if [ -n "${BENCHMARKS:-}" ]; then
  benchmarks=$(grep -E "^($(tr ',' '|' <<<"$BENCHMARKS")) " <<<"$benchmarks" || true)
  [ -n "$benchmarks" ] || { echo "$0: none of $BENCHMARKS is in $suite" >&2; exit 2; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Instructions executed by one run, all threads.
count() {
  local binary=$1 bench=$2 inner=$3
  if ! TALLY_GC_THREADS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
      "$binary" --tier "${TIER:-interp}" --heap-size "$heap" -cp "$cp" Harness "$bench" "$iterations" "$inner" \
      >"$work/out" 2>"$work/err"; then
    echo "$0: $binary failed on $bench:" >&2
    tail -5 "$work/err" >&2
    exit 1
  fi
  sed -n 's/^==[0-9]*== I *refs: *\([0-9,]*\)$/\1/p' "$work/err" | tr -d ,
}

printf '%-12s' benchmark
for name in "${names[@]}"; do printf ' %16s' "$name"; done
for name in "${names[@]:1}"; do printf ' %12s' "$name/${names[0]}"; done
echo
declare -a log_sums
while read -r bench inner; do
  counts=()
  for binary in "${binaries[@]}"; do counts+=("$(count "$binary" "$bench" "$inner")"); done
  printf '%-12s' "$bench"
  for c in "${counts[@]}"; do printf ' %16s' "$c"; done
  for k in $(seq 1 $((${#counts[@]} - 1))); do
    printf ' %12s' "$(awk -v a="${counts[$k]}" -v b="${counts[0]}" 'BEGIN { printf "%.5f", a / b }')"
    log_sums[k]=$(awk -v s="${log_sums[k]:-0}" -v a="${counts[$k]}" -v b="${counts[0]}" 'BEGIN { printf "%.12f", s + log(a / b) }')
  done
  echo
done <<<"$benchmarks"
n=$(wc -l <<<"$benchmarks")
printf '%-12s' geomean
for _ in "${names[@]}"; do printf ' %16s' ""; done
for k in $(seq 1 $((${#names[@]} - 1))); do
  printf ' %12s' "$(awk -v s="${log_sums[k]}" -v n="$n" 'BEGIN { printf "%.5f", exp(s / n) }')"
done
echo
