#!/usr/bin/env bash
# Runs SOM's TestSuite (with SOM's library and with Tally's embedded one) under every sampling
# trigger × mechanism, under CBS and exhaustive counting, and with the defaults, and checks that
# every test passes and that every profile accounts for each sample (taken = recorded + dropped).
#
#   scripts/profiling-conformance.sh SOM_CHECKOUT [TALLY_BINARY] [RATE]
#
# SOM_CHECKOUT is a checkout of SOM-st/SOM (not part of this repository).
set -euo pipefail
som=${1:?usage: $0 SOM_CHECKOUT [TALLY_BINARY] [RATE]}
tally=$(realpath "${2:-target/release/tally}")
rate=${3:-10000}
som=$(realpath "$som")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

configs=()
for sampler in timer timer-wall itimer perf; do
  for mechanism in immediate polling; do
    configs+=("--sampler $sampler --mechanism $mechanism --rate $rate")
  done
done
configs+=("--sampler none --cbs 3:16 --exhaustive" "--sampler perf --mechanism immediate --rate $rate --cbs 3:16")
# The default profile, spelled out: auto's trigger at the default rate, immediate, CBS 3:32.
configs+=("--sampler auto")

failures=0
printf '%-62s %-9s %8s %8s %8s %8s\n' configuration library passed taken recorded dropped
for config in "${configs[@]}"; do
  for library in som embedded; do
    if [ "$library" = som ]; then cp="$som/Smalltalk:$som/TestSuite"; else cp="$som/TestSuite"; fi
    profile="$work/run.profile"
    # shellcheck disable=SC2086
    if ! out=$(cd "$som" && "$tally" --profile="$profile" --force $config -cp "$cp" TestHarness 2>"$work/stderr"); then
      echo "FAILED (exit status): $config, $library library"; cat "$work/stderr"; failures=$((failures + 1)); continue
    fi
    total=$(grep -o 'Total number of tests: *[0-9]*' <<<"$out" | grep -o '[0-9]*$' || echo 0)
    passed=$(grep -o 'Number of successful tests: *[0-9]*' <<<"$out" | grep -o '[0-9]*$' || echo 0)
    read -r taken recorded dropped < <("$tally" report "$profile" 2>/dev/null \
      | sed -n 's/^samples: \([0-9]*\) taken, \([0-9]*\) recorded, \([0-9]*\) dropped.*/\1 \2 \3/p')
    printf '%-62s %-9s %4s/%-3s %8s %8s %8s\n' "$config" "$library" "$passed" "$total" "${taken:-0}" "${recorded:-0}" "${dropped:-0}"
    if [ "$total" = 0 ] || [ "$passed" != "$total" ]; then
      echo "FAILED (tests): $config, $library library"; failures=$((failures + 1))
    fi
    if [ "${taken:-0}" != $(( ${recorded:-0} + ${dropped:-0} )) ]; then
      echo "FAILED (sample accounting): $config, $library library"; failures=$((failures + 1))
    fi
  done
done
if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all configurations pass"
