/* Replays a fuzz target's seed corpus as an ordinary test (SQLite's fuzzcheck idea): every file under the
 * directories given on the command line goes through LLVMFuzzerTestOneInput once. Linked with each
 * tests/fuzz/fuzz-*.c into a `replay-<name>` ctest test; a crash or sanitizer report fails it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        if (k == 0) break;
        n += k;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", n);
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    int files = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            printf("replay: no seed directory %s\n", argv[i]);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            files += replay_file(path);
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", files);
    if (files == 0) {
        printf("SKIP: no seed inputs found\n");
        return 77;
    }
    return 0;
}
