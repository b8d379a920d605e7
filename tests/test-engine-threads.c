/* The CPU engine's thread pool (src/cpu/engine-threads.c):
 *  - the barrier orders memory: for 2 to 8 threads (more than this machine's cores, so waiters reach the
 *    futex sleep), over many barriers and several runs, every thread sees every other thread's write of the
 *    same round after the barrier, and none sees a write of the next round before it;
 *  - a waiter does not burn its core while a thread is late: one thread sleeps 200 ms before the barrier and
 *    the process's CPU time over that run stays far below what the waiters would spend spinning or yielding
 *    (the wasm build's reason for the futex: there sched_yield returns at once), and they still see what the
 *    late thread wrote;
 *  - pool arguments: 0 and too many threads are refused, free(NULL) is fine, one thread runs on the caller.
 * A hang (a lost wake-up) ends the test through an alarm. */
#include "cpu/engine-threads.h"
#include "test.h"

#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 8 };

/* What a stress run shares between its threads. */
typedef struct stress {
    lw__pool *pool;         /* the pool running it                          */
    int rounds;             /* barriers pairs per run                       */
    int stamp[MAX_THREADS]; /* thread i's last round (plain ints: the barrier orders them) */
    atomic_int bad;         /* stamps seen out of round                     */
} stress;

static void stress_fn(void *arg, int ith, int nth) {
    stress *s = arg;
    for (int r = 1; r <= s->rounds; r++) {
        s->stamp[ith] = r;
        lw__pool_barrier(s->pool);
        for (int j = 0; j < nth; j++)
            if (s->stamp[j] != r) atomic_fetch_add(&s->bad, 1);
        lw__pool_barrier(s->pool); /* nobody writes round r + 1 before everyone has read round r */
    }
}

static void test_stress(int n_threads, int rounds, int runs) {
    stress s = {0};
    s.rounds = rounds;
    atomic_init(&s.bad, 0);
    CHECK(lw__pool_create(NULL, n_threads, &s.pool) == LW_OK);
    if (!s.pool) return;
    CHECK(lw__pool_n_threads(s.pool) == n_threads);
    for (int run = 0; run < runs; run++) {
        memset(s.stamp, 0, sizeof s.stamp);
        lw__pool_run(s.pool, stress_fn, &s);
        for (int j = 0; j < n_threads; j++)
            CHECK_MSG(s.stamp[j] == rounds, "thread %d ended at %d", j, s.stamp[j]);
    }
    CHECK_MSG(atomic_load(&s.bad) == 0, "%d threads: %d stamps out of round", n_threads, atomic_load(&s.bad));
    lw__pool_free(s.pool);
}

/* A run where thread 0 arrives late at one barrier. */
typedef struct late {
    lw__pool *pool;  /* the pool running it                    */
    long sleep_ms;   /* how late thread 0 is                   */
    int value;       /* written by thread 0 before the barrier */
    atomic_int seen; /* waiters that read it after the barrier */
} late;

static void late_fn(void *arg, int ith, int nth) {
    late *l = arg;
    (void)nth;
    if (ith == 0) {
        struct timespec ts = {l->sleep_ms / 1000, (l->sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
        l->value = 12345;
    }
    lw__pool_barrier(l->pool);
    if (ith != 0 && l->value == 12345) atomic_fetch_add(&l->seen, 1);
}

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_late_thread(void) {
    const int n_threads = 4;
    late l = {0};
    l.sleep_ms = 200;
    CHECK(lw__pool_create(NULL, n_threads, &l.pool) == LW_OK);
    if (!l.pool) return;
    double best_cpu = 1e9;
    for (int rep = 0; rep < 3; rep++) { /* the least of 3: other work on the machine only adds to it */
        l.value = 0;
        atomic_init(&l.seen, 0);
        const double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
        lw__pool_run(l.pool, late_fn, &l);
        const double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0, wall = seconds(CLOCK_MONOTONIC) - w0;
        CHECK_MSG(wall >= 0.19, "the run took %.3f s, less than the late thread's sleep", wall);
        CHECK_MSG(atomic_load(&l.seen) == n_threads - 1, "%d of %d waiters saw the late write",
                  atomic_load(&l.seen), n_threads - 1);
        if (cpu < best_cpu) best_cpu = cpu;
    }
    /* 3 waiters spinning or yielding for 200 ms would spend up to 0.6 s; sleeping, a few ms */
    printf("late thread: %d waiters used %.1f ms of CPU over a 200 ms wait\n", n_threads - 1, best_cpu * 1e3);
    CHECK_MSG(best_cpu < 0.06, "the waiters used %.1f ms of CPU while one thread slept 200 ms",
              best_cpu * 1e3);
    lw__pool_free(l.pool);
}

static void count_fn(void *arg, int ith, int nth) {
    int *calls = arg;
    CHECK(ith == 0 && nth == 1);
    (*calls)++;
}

static void test_args(void) {
    lw__pool *p = (lw__pool *)&p;
    CHECK(lw__pool_create(NULL, 0, &p) == LW_ERR_INVALID_ARG && p == NULL);
    CHECK(lw__pool_create(NULL, 513, &p) == LW_ERR_INVALID_ARG && p == NULL);
    lw__pool_free(NULL);
    CHECK(lw__pool_n_threads(NULL) == 1);
    CHECK(lw__pool_create(NULL, 1, &p) == LW_OK && p);
    int calls = 0;
    if (p) {
        lw__pool_run(p, count_fn, &calls);
        lw__pool_barrier(p); /* one thread: returns at once */
    }
    CHECK(calls == 1);
    lw__pool_free(p);
}

int main(void) {
    alarm(300); /* a lost wake-up hangs: SIGALRM ends the test as failed */
    test_args();
    test_stress(2, 20000, 5);
    test_stress(3, 5000, 3);
    test_stress(4, 3000, 3);
    test_stress(MAX_THREADS, 1000, 2);
    test_late_thread();
    return test_summary("test-engine-threads");
}
