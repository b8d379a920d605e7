/* Byte sources: positioned reads from a file (pread), a memory buffer, or host callbacks (JavaScript in the
 * browser build). Everything that reads model files goes through lw_source_read, so no code depends on mmap or
 * on the file fitting in the address space. */
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------------
 * The source object
 * ------------------------------------------------------------------------------------------------------- */

typedef enum { SRC_FILE, SRC_MEMORY, SRC_CALLBACKS } src_kind;

struct lw_source {
    lw_allocator alloc;          /* allocator this object was made with               */
    src_kind kind;               /* which of the members below is valid               */
    uint64_t size;               /* total bytes the source serves                     */
    int fd;                      /* SRC_FILE: open descriptor                         */
    const uint8_t *mem;          /* SRC_MEMORY: caller-owned bytes                    */
    lw_source_read_fn read;      /* SRC_CALLBACKS: host read                          */
    lw_source_close_fn close;    /* SRC_CALLBACKS: optional host close                */
    void *user;                  /* SRC_CALLBACKS: host context                       */
    char err[LW_ERRMSG_SIZE];    /* message of the last failed call                   */
};

static lw_status new_source(const lw_allocator *alloc, src_kind kind, uint64_t size, lw_source **out) {
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_source *s = lw__calloc(&a, 1, sizeof(*s));
    if (!s) return LW_ERR_NOMEM;
    s->alloc = a;
    s->kind = kind;
    s->size = size;
    s->fd = -1;
    *out = s;
    return LW_OK;
}

lw_status lw_source_open_file(const char *path, const lw_allocator *alloc, lw_source **out, char *err,
                              size_t err_size) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (err && err_size) err[0] = 0;
    if (!path) return LW_ERR_INVALID_ARG;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (err && err_size) snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return LW_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (err && err_size) snprintf(err, err_size, "%s: not a regular file", path);
        close(fd);
        return LW_ERR_IO;
    }
    lw_source *s;
    lw_status rc = new_source(alloc, SRC_FILE, (uint64_t)st.st_size, &s);
    if (rc != LW_OK) {
        close(fd);
        return rc;
    }
    s->fd = fd;
    *out = s;
    return LW_OK;
}

lw_status lw_source_from_memory(const void *data, size_t size, const lw_allocator *alloc, lw_source **out) {
    if (!out || (!data && size)) return LW_ERR_INVALID_ARG;
    lw_status rc = new_source(alloc, SRC_MEMORY, size, out);
    if (rc == LW_OK) (*out)->mem = data;
    return rc;
}

lw_status lw_source_from_callbacks(uint64_t size, lw_source_read_fn read, lw_source_close_fn close_fn,
                                   void *user, const lw_allocator *alloc, lw_source **out) {
    if (!out || !read) return LW_ERR_INVALID_ARG;
    lw_status rc = new_source(alloc, SRC_CALLBACKS, size, out);
    if (rc == LW_OK) {
        (*out)->read = read;
        (*out)->close = close_fn;
        (*out)->user = user;
    }
    return rc;
}

uint64_t lw_source_size(const lw_source *src) {
    return src ? src->size : 0;
}

const char *lw_source_error(const lw_source *src) {
    return src ? src->err : "no source";
}

/* ---------------------------------------------------------------------------------------------------------
 * Reads
 * ------------------------------------------------------------------------------------------------------- */

/* pread in a loop: it may return short counts, and a single call is limited to about 2 GB on Linux. */
static lw_status read_file(lw_source *s, uint64_t off, uint8_t *dst, size_t n) {
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(s->fd, dst, chunk, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return lw__errorf(s->err, LW_ERR_IO, "read of %zu bytes at offset %llu failed: %s", chunk,
                              (unsigned long long)off, strerror(errno));
        }
        if (got == 0)
            return lw__errorf(s->err, LW_ERR_TRUNCATED, "file ended at offset %llu (changed while open?)",
                              (unsigned long long)off);
        dst += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return LW_OK;
}

lw_status lw_source_read(lw_source *s, uint64_t off, void *dst, size_t n) {
    if (!s || (!dst && n)) return LW_ERR_INVALID_ARG;
    uint64_t end;
    if (!lw__add_u64(off, n, &end) || end > s->size)
        return lw__errorf(s->err, LW_ERR_TRUNCATED, "read of %zu bytes at offset %llu passes the end (%llu bytes)",
                          n, (unsigned long long)off, (unsigned long long)s->size);
    if (n == 0) return LW_OK;
    switch (s->kind) {
    case SRC_FILE:
        return read_file(s, off, dst, n);
    case SRC_MEMORY:
        memcpy(dst, s->mem + off, n);
        return LW_OK;
    case SRC_CALLBACKS: {
        lw_status rc = s->read(s->user, off, dst, n);
        if (rc != LW_OK)
            lw__errorf(s->err, rc, "host read of %zu bytes at offset %llu failed: %s", n,
                       (unsigned long long)off, lw_status_str(rc));
        return rc;
    }
    }
    return LW_ERR_INVALID_ARG;
}

void lw_source_close(lw_source *s) {
    if (!s) return;
    if (s->kind == SRC_FILE && s->fd >= 0) close(s->fd);
    if (s->kind == SRC_CALLBACKS && s->close) s->close(s->user);
    lw_allocator a = s->alloc;
    lw__free(&a, s);
}
