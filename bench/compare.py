#!/usr/bin/env python3
"""Side-by-side CPU speed: `llamaweb bench` against llama.cpp (libllama v0.4.0 through its C API, via
bench/llama-bench-c.c), on llama-3.2-1b-shaped models made by `llamaweb synth`.

    python3 bench/compare.py                                   # full: q4_0,q4_k_m,q8_0; pp512/tg128; 1, 2 and
                                                               # all-core threads; 3 rounds
    python3 bench/compare.py --types q4_0,q8_0 -p 128 -n 32 --rounds 2      # a quick run (a few minutes)
    python3 bench/compare.py --also LW_CPU_KERNELS=exact       # + llamaweb with llama.cpp's exact dot orders
                                                               # (the kernels before the fast decode ones)
    # another host (e.g. the GPU machine's 16 cores), as one prepared command: copy the repo with a build,
    # then: python3 bench/compare.py --no-build --build-dir build-bench -t 1,2,8,16

What it does:
  1. builds llamaweb (Release, -DLW_WERROR=ON) in BUILD_DIR (default build-bench) and the harness there
     with cc (the harness #includes tests/llama-oracle.h);
  2. synthesizes the model files once into $LW_BENCH_DIR (default /tmp/llamaweb-bench), outside the repo;
  3. for each file and thread count, runs the two engines ALTERNATING, `rounds` times (ours, theirs, ours,
     theirs, ...), each run doing its own warm-up and `-r` timed repetitions (the run's median is kept);
  4. prints per file and thread count the median over rounds of each engine's tok/s and the median (and
     min..max) of the per-round ratios ours / llama.cpp, and the 1-minute load average seen during the runs.
     Only the ratios of alternating runs mean much on a shared machine: absolute numbers move with whatever
     else runs there. --also ENV=VALUE adds llamaweb run with that environment as one more engine of each
     round (its own rows, marked with the setting).

Both engines time the same work: pp = one batch of P random tokens into an empty context; tg = N
single-token decodes following a P-token prompt (`llamaweb bench` generates after its prompt, so the
harness gets -d P; llama-bench's own tg128 starts from an empty context instead).
Run from anywhere; paths are relative to the repository (this file's parent folder).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = ["q4_0", "q4_k_m", "q8_0"]
PRESET = "llama-3.2-1b"
SHARED_VOCAB = "vocab/ggml-vocab-llama-spm.gguf"  # what `llamaweb synth` uses by default (32000 tokens)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    """Runs cmd in the repo root; returns stdout, or raises with stderr shown."""
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def build(build_dir, jobs):
    bd = os.path.join(REPO, build_dir)
    if not os.path.exists(os.path.join(bd, "build.ninja")):
        log(f"configuring {build_dir} (Release, LW_WERROR=ON)")
        run(["cmake", "-S", REPO, "-B", bd, "-G", "Ninja", "-DLW_WERROR=ON", "-DCMAKE_BUILD_TYPE=Release"])
    log(f"building llamaweb in {build_dir}")
    r = subprocess.run(["ninja", f"-j{jobs}", "-C", bd, "llamaweb"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        log(r.stdout[-4000:] + r.stderr[-2000:])
        raise SystemExit(f"building llamaweb in {build_dir} failed (above); --no-build benchmarks the binaries "
                         f"already there")
    harness = os.path.join(bd, "llama-bench-c")
    srcs = [os.path.join(REPO, "bench", "llama-bench-c.c"), os.path.join(REPO, "tests", "llama-oracle.h")]
    if not os.path.exists(harness) or any(os.path.getmtime(s) > os.path.getmtime(harness) for s in srcs):
        log("building bench/llama-bench-c.c")
        run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-Wall", "-Wextra", "-I", os.path.join(REPO, "tests"),
             srcs[0], "-ldl", "-o", harness])
    return os.path.join(bd, "llamaweb"), harness


# The bandwidth ceiling: T threads each read their share of a buffer much larger than the caches with 256-bit
# loads (xor-folded so nothing is optimized away), best of 7 passes; what a decode that streams every weight
# byte once per token can reach at most.
BW_SRC = r"""
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static size_t n_bytes; static char *buf; static int nth; static volatile int sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
__attribute__((target("avx2"))) static void *reader(void *p) {
    size_t per = n_bytes / nth / 128 * 128; const __m256i *s = (const __m256i *)(buf + per * (size_t)p);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t j = 0; j < per / 32; j += 4) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(s + j)); a1 = _mm256_xor_si256(a1, _mm256_load_si256(s + j + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(s + j + 2)); a3 = _mm256_xor_si256(a3, _mm256_load_si256(s + j + 3));
    }
    sink = _mm256_extract_epi32(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)), 0);
    return NULL;
}
int main(int argc, char **argv) {
    n_bytes = (size_t)atol(argv[1]) << 20; nth = atoi(argv[2]);
    buf = aligned_alloc(64, n_bytes); memset(buf, 1, n_bytes);
    double best = 0;
    for (int r = 0; r < 7; r++) {
        pthread_t t[256]; double t0 = now();
        for (long i = 0; i < nth; i++) pthread_create(&t[i], NULL, reader, (void *)i);
        for (int i = 0; i < nth; i++) pthread_join(t[i], NULL);
        double g = (double)(n_bytes / nth / 128 * 128 * nth) / (now() - t0) / 1e9; if (g > best) best = g;
    }
    printf("%.2f\n", best);
    return 0;
}
"""


def bandwidth(build_dir, threads, mib=1024):
    """GB/s read by `threads` threads over a `mib` MiB buffer (best of 7), per thread count."""
    exe = os.path.join(REPO, build_dir, "read-bandwidth")
    src = exe + ".c"
    if not os.path.exists(exe):
        with open(src, "w") as f:
            f.write(BW_SRC)
        run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-pthread", src, "-o", exe])
    return {nt: float(run([exe, str(mib), str(nt)]).strip()) for nt in threads}


def synth(cli, bench_dir, t):
    os.makedirs(bench_dir, exist_ok=True)
    path = os.path.join(bench_dir, f"{PRESET}-{t}.gguf")
    if os.path.exists(path):
        return path
    cmd = [cli, "synth", "--preset", PRESET, "--type", t, "-o", path + ".tmp"]
    shared = os.environ.get("LW_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
    if os.path.exists(os.path.join(shared, SHARED_VOCAB)):
        cmd += ["--vocab", os.path.join(shared, SHARED_VOCAB)]
    else:  # no vocab file here: the built-in byte vocab padded to the same size, so the output head matches
        cmd += ["--vocab-size", "32000"]
    log(f"synthesizing {path}")
    t0 = time.time()
    run(cmd)
    os.replace(path + ".tmp", path)
    log(f"  done in {time.time() - t0:.0f} s")
    return path


def ours(cli, model, p, n, nt, reps, env=None):
    out = run([cli, "bench", "-m", model, "-p", str(p), "-n", str(n), "-t", str(nt), "-r", str(reps)],
              env=dict(os.environ, **env) if env else None)
    for line in out.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|", line)
        if m:
            if int(m.group(1)) != nt:
                raise SystemExit(f"llamaweb bench ran {m.group(1)} threads, asked for {nt}:\n{out}")
            return float(m.group(2)), float(m.group(3))
    raise SystemExit(f"no result row in llamaweb bench output:\n{out}")


def theirs(harness, model, p, n, nt, reps):
    out = run([harness, "-m", model, "-p", str(p), "-n", str(n), "-d", str(p), "-t", str(nt), "-r", str(reps),
               "--json"])
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            if j["threads"] != nt:
                raise SystemExit(f"llama-bench-c ran {j['threads']} threads, asked for {nt}:\n{out}")
            return j["pp_median"], j["tg_median"]
    raise SystemExit(f"no JSON line in llama-bench-c output:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--types", default=",".join(TYPES), help="comma-separated synth types (default %(default)s)")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens (default %(default)s)")
    ap.add_argument("-n", type=int, default=128, help="generated tokens (default %(default)s)")
    ncpu = os.cpu_count() or 1
    ap.add_argument("-t", "--threads", default=",".join(str(t) for t in sorted({1, 2, ncpu})),
                    help="thread counts (default 1, 2 and this machine's %d cores: %%(default)s)" % ncpu)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default %(default)s)")
    ap.add_argument("-r", "--reps", type=int, default=3, help="timed repetitions inside each run (default %(default)s)")
    ap.add_argument("--dir", default=os.environ.get("LW_BENCH_DIR", "/tmp/llamaweb-bench"),
                    help="model cache, outside the repo (default $LW_BENCH_DIR or %(default)s)")
    ap.add_argument("--build-dir", default="build-bench", help="build folder in the repo (default %(default)s)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="ninja jobs (default %(default)s)")
    ap.add_argument("--no-build", action="store_true",
                    help="use BUILD_DIR/llamaweb and BUILD_DIR/llama-bench-c as they are (e.g. copied to another host)")
    ap.add_argument("--json", metavar="FILE", help="also write every run's numbers to FILE")
    ap.add_argument("--bandwidth", action="store_true",
                    help="measure the memory read bandwidth ceiling per thread count first (a 1 GiB buffer) and "
                         "print decode's weight stream as a share of it")
    ap.add_argument("--also", metavar="ENV=VALUE", action="append", default=[],
                    help="also run llamaweb with this environment setting (repeatable: one more engine each)")
    a = ap.parse_args()
    types = [t for t in a.types.split(",") if t]
    threads = [int(t) for t in a.threads.split(",") if t]
    if a.rounds < 1 or a.reps < 1 or a.p < 1 or a.n < 1 or not types or not threads:
        ap.error("rounds, reps, -p, -n must be >= 1; types and threads non-empty")

    if a.no_build:
        cli, harness = (os.path.join(REPO, a.build_dir, x) for x in ("llamaweb", "llama-bench-c"))
    else:
        cli, harness = build(a.build_dir, a.jobs)
    files = [(t, synth(cli, a.dir, t)) for t in types]
    ceiling = {}
    if a.bandwidth:
        ceiling = bandwidth(a.build_dir, threads)
        log("read bandwidth ceiling: " + ", ".join(f"{nt} thr {g:.1f} GB/s" for nt, g in ceiling.items()) +
            f" (load {os.getloadavg()[0]:.1f})")
    sizes = {t: os.path.getsize(path) for t, path in files}  # ~ the bytes a decode step streams
    variants = [("", None)]  # (label, environment) of each llamaweb engine
    for e in a.also:
        if "=" not in e:
            ap.error(f"--also wants ENV=VALUE, not {e}")
        variants.append((f" [{e}]", dict([e.split("=", 1)])))
    rows, raw = [], []
    for t, path in files:
        for nt in threads:
            o_pp, o_tg = [[] for _ in variants], [[] for _ in variants]
            l_pp, l_tg, loads = [], [], []
            for r in range(a.rounds):
                for vi, (label, env) in enumerate(variants):
                    pp, tg = ours(cli, path, a.p, a.n, nt, a.reps, env)
                    o_pp[vi].append(pp), o_tg[vi].append(tg)
                pp, tg = theirs(harness, path, a.p, a.n, nt, a.reps)
                l_pp.append(pp), l_tg.append(tg)
                loads.append(os.getloadavg()[0])
                for vi, (label, env) in enumerate(variants):
                    log(f"{t} t={nt} round {r + 1}/{a.rounds}{label}: pp ours {o_pp[vi][-1]:.1f} llama.cpp "
                        f"{l_pp[-1]:.1f} | tg ours {o_tg[vi][-1]:.1f} llama.cpp {l_tg[-1]:.1f} | load {loads[-1]:.1f}")
                    raw.append({"type": t, "threads": nt, "round": r + 1, "variant": label.strip(" []"),
                                "ours_pp": o_pp[vi][-1], "llama_pp": l_pp[-1], "ours_tg": o_tg[vi][-1],
                                "llama_tg": l_tg[-1], "load1": loads[-1]})
            for vi, (label, env) in enumerate(variants):
                rp = [x / y for x, y in zip(o_pp[vi], l_pp)]
                rt = [x / y for x, y in zip(o_tg[vi], l_tg)]
                og, lg = statistics.median(o_tg[vi]), statistics.median(l_tg)
                bw = ""
                if nt in ceiling:  # weight bytes per token x tokens per second, as a share of the ceiling
                    gb = sizes[t] / 1e9
                    bw = f"{100 * og * gb / ceiling[nt]:.0f} % / {100 * lg * gb / ceiling[nt]:.0f} %"
                rows.append((t + label, nt, statistics.median(o_pp[vi]), statistics.median(l_pp), rp, og, lg, rt,
                             f"{min(loads):.1f}..{max(loads):.1f}", bw))

    def ratio(v):
        return f"{statistics.median(v):5.2f} ({min(v):.2f}..{max(v):.2f})"

    print(f"\nllamaweb vs llama.cpp (libllama v0.4.0, C API), {PRESET} synth, pp{a.p} / tg{a.n} (tg after a "
          f"{a.p}-token prompt), {a.rounds} alternating rounds x {a.reps} reps; tok/s medians over rounds, "
          f"ratio = ours/llama.cpp: median of per-round ratios (min..max)")
    if ceiling:
        print("read bandwidth ceiling: " + ", ".join(f"{nt} thr {g:.1f} GB/s" for nt, g in ceiling.items()) +
              "; 'of ceiling' = file bytes x tg tok/s / ceiling, ours / llama.cpp")
    print("| file | thr | pp ours | pp llama.cpp | pp ratio | tg ours | tg llama.cpp | tg ratio | load |" +
          (" of ceiling |" if ceiling else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if ceiling else ""))
    for t, nt, op, lp, rp, og, lg, rt, ld, bw in rows:
        print(f"| {PRESET}-{t} | {nt} | {op:.1f} | {lp:.1f} | {ratio(rp)} | {og:.1f} | {lg:.1f} | {ratio(rt)} | {ld} |" +
              (f" {bw} |" if ceiling else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"p": a.p, "n": a.n, "rounds": a.rounds, "reps": a.reps, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
