#!/bin/sh
# On a many-core host: bench/compare.py once per (type, thread count), all at the same time, each job pinned
# with taskset to its own physical cores (one logical CPU per core), so a whole comparison takes as long as
# its slowest job. Both engines of a job share that job's cores (they alternate, as in compare.py).
#
#   bench/pinned.sh OUTDIR "q4_0 q4_k_m q8_0" "1 2" [compare.py options: -p 128 -n 32 --rounds 3 -r 1 --no-build]
#
# Writes OUTDIR/<type>-t<threads>.{out,err,json}; prints each job's table row. Models are synthesized first,
# one process per type, into $LW_BENCH_DIR (default /tmp/llamaweb-bench).
set -eu
out=$1 types=$2 threads=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# one logical CPU per physical core, in order
cpus=$(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | awk -F, '!seen[$2 "," $3]++ {print $1}')
need=0
for t in $types; do for n in $threads; do need=$((need + n)); done; done
have=$(echo "$cpus" | wc -l)
[ "$need" -le "$have" ] || { echo "pinned.sh: needs $need physical cores, $have here" >&2; exit 1; }
# models first, in parallel (compare.py only synthesizes what is missing; a run with one tiny step does it)
for t in $types; do
    python3 "$here/compare.py" --types "$t" -p 1 -n 1 --rounds 1 -r 1 -t 1 "$@" > "$out/synth-$t.out" 2>&1 &
done
wait
i=0
for t in $types; do
    for n in $threads; do
        set_=$(echo "$cpus" | sed -n "$((i + 1)),$((i + n))p" | paste -sd, -)
        i=$((i + n))
        echo "job $t t=$n on CPUs $set_"
        taskset -c "$set_" python3 "$here/compare.py" --types "$t" -t "$n" --json "$out/$t-t$n.json" "$@" \
            > "$out/$t-t$n.out" 2> "$out/$t-t$n.err" &
    done
done
wait
for t in $types; do for n in $threads; do grep '^| llama' "$out/$t-t$n.out" || cat "$out/$t-t$n.err"; done; done
