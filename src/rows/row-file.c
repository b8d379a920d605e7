/* Row files: the manifest codec, the streaming fingerprint, and open-or-(re)write of a table's row file
 * (see rows.h). Writing streams the source tensor in bounded chunks; reads go through an lw_source. */
#include "rows/rows.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t rows_magic[8] = {'L', 'W', 'R', 'O', 'W', 'S', 0, 0};

/* Manifest block layout (little-endian): the offsets of each field. The checksum covers bytes [0, OFF_SUM).
 */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_HEADER = 12,
    OFF_ROW_BYTES = 16,
    OFF_N_ROWS = 24,
    OFF_TYPE = 32,
    OFF_FINGERPRINT = 40,
    OFF_SRC_OFF = 48,
    OFF_SRC_BYTES = 56,
    OFF_DATA_OFF = 64,
    OFF_NAME = 72,
    OFF_SUM = OFF_NAME + LW__ROWS_NAME_MAX,
    MANIFEST_USED = OFF_SUM + 8,
};

struct lw__rowfile {
    lw_allocator alloc;       /* allocator this object was made with                    */
    lw_source *src;           /* reads of the row file                                  */
    lw__rows_manifest man;    /* what the file holds (validated)                         */
    lw__rows_outcome outcome; /* reused, created or rewritten                           */
    char why[LW_ERRMSG_SIZE]; /* why a stale file was rewritten ("" otherwise)           */
};

/* ---------------------------------------------------------------------------------------------------------
 * Fingerprint
 * ------------------------------------------------------------------------------------------------------- */

#define HASH_MUL 0x9E3779B97F4A7C15ull /* 2^64 / golden ratio: spreads every input bit */

static inline uint64_t hash_word(uint64_t h, uint64_t w) {
    h ^= w;
    h *= HASH_MUL;
    return h ^ (h >> 29);
}

void lw__rows_hash_init(lw__rows_hash *s) {
    memset(s, 0, sizeof(*s));
    s->h = 0x6C77726F77733031ull; /* "lwrows01": a non-zero start so leading zero words still move it */
}

void lw__rows_hash_update(lw__rows_hash *s, const void *p, size_t n) {
    const uint8_t *b = p;
    s->len += n;
    if (s->n_tail) { /* finish a word left over from the last call: chunking must not matter */
        size_t take = 8 - s->n_tail < n ? 8 - s->n_tail : n;
        memcpy(s->tail + s->n_tail, b, take);
        s->n_tail += (uint32_t)take;
        b += take;
        n -= take;
        if (s->n_tail < 8) return;
        s->h = hash_word(s->h, lw__rd_u64(s->tail));
        s->n_tail = 0;
    }
    for (; n >= 8; b += 8, n -= 8) s->h = hash_word(s->h, lw__rd_u64(b));
    memcpy(s->tail, b, n & 7);
    s->n_tail = (uint32_t)(n & 7);
}

uint64_t lw__rows_hash_final(const lw__rows_hash *s) {
    uint64_t h = s->h;
    if (s->n_tail) {
        uint8_t w[8] = {0};
        memcpy(w, s->tail, s->n_tail);
        h = hash_word(h, lw__rd_u64(w));
    }
    h = hash_word(h, s->len); /* so a shorter input padded with zeros differs */
    return h ^ (h >> 32);
}

/* ---------------------------------------------------------------------------------------------------------
 * Manifest
 * ------------------------------------------------------------------------------------------------------- */

static void wr_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t manifest_sum(const uint8_t *buf) {
    lw__rows_hash h;
    lw__rows_hash_init(&h);
    lw__rows_hash_update(&h, buf, OFF_SUM);
    return lw__rows_hash_final(&h);
}

void lw__rows_manifest_encode(const lw__rows_manifest *m, uint8_t *out) {
    memset(out, 0, LW__ROWS_HEADER_BYTES);
    memcpy(out + OFF_MAGIC, rows_magic, sizeof rows_magic);
    wr_u32(out + OFF_VERSION, m->version);
    wr_u32(out + OFF_HEADER, LW__ROWS_HEADER_BYTES);
    wr_u64(out + OFF_ROW_BYTES, m->row_bytes);
    wr_u64(out + OFF_N_ROWS, m->n_rows);
    wr_u32(out + OFF_TYPE, m->type);
    wr_u64(out + OFF_FINGERPRINT, m->fingerprint);
    wr_u64(out + OFF_SRC_OFF, m->src_off);
    wr_u64(out + OFF_SRC_BYTES, m->src_bytes);
    wr_u64(out + OFF_DATA_OFF, m->data_off);
    memcpy(out + OFF_NAME, m->name, LW__ROWS_NAME_MAX);
    wr_u64(out + OFF_SUM, manifest_sum(out));
}

lw_status lw__rows_manifest_decode(const uint8_t *buf, size_t n, lw__rows_manifest *m, char *err) {
    if (n < MANIFEST_USED)
        return lw__errorf(err, LW_ERR_TRUNCATED, "row file manifest: %zu bytes, needs %d", n, MANIFEST_USED);
    if (memcmp(buf + OFF_MAGIC, rows_magic, sizeof rows_magic))
        return lw__errorf(err, LW_ERR_BAD_MAGIC, "not a row file (magic)");
    memset(m, 0, sizeof(*m));
    m->version = lw__rd_u32(buf + OFF_VERSION);
    if (m->version != LW__ROWS_VERSION)
        return lw__errorf(err, LW_ERR_BAD_VERSION, "row file layout version %u (this build reads %u)",
                          m->version, LW__ROWS_VERSION);
    if (lw__rd_u64(buf + OFF_SUM) != manifest_sum(buf))
        return lw__errorf(err, LW_ERR_BAD_MAGIC, "row file manifest checksum does not match (damaged)");
    const uint32_t header = lw__rd_u32(buf + OFF_HEADER);
    m->row_bytes = lw__rd_u64(buf + OFF_ROW_BYTES);
    m->n_rows = lw__rd_u64(buf + OFF_N_ROWS);
    m->type = lw__rd_u32(buf + OFF_TYPE);
    m->fingerprint = lw__rd_u64(buf + OFF_FINGERPRINT);
    m->src_off = lw__rd_u64(buf + OFF_SRC_OFF);
    m->src_bytes = lw__rd_u64(buf + OFF_SRC_BYTES);
    m->data_off = lw__rd_u64(buf + OFF_DATA_OFF);
    memcpy(m->name, buf + OFF_NAME, LW__ROWS_NAME_MAX);
    uint64_t total, end;
    if (header != LW__ROWS_HEADER_BYTES)
        return lw__errorf(err, LW_ERR_BAD_VERSION, "row file manifest of %u bytes (expected %u)", header,
                          LW__ROWS_HEADER_BYTES);
    if (m->row_bytes == 0 || m->row_bytes > LW__ROWS_MAX_ROW)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "row file: row size %llu outside 1..%u",
                          (unsigned long long)m->row_bytes, LW__ROWS_MAX_ROW);
    if (m->n_rows == 0 || m->n_rows > LW__ROWS_MAX_COUNT)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "row file: row count %llu outside 1..%u",
                          (unsigned long long)m->n_rows, LW__ROWS_MAX_COUNT);
    if (!lw__mul_u64(m->row_bytes, m->n_rows, &total) || !lw__add_u64(m->data_off, total, &end) ||
        end > INT64_MAX) /* off_t is signed */
        return lw__errorf(err, LW_ERR_OVERFLOW, "row file: %llu rows of %llu bytes at %llu overflow",
                          (unsigned long long)m->n_rows, (unsigned long long)m->row_bytes,
                          (unsigned long long)m->data_off);
    if (m->data_off < LW__ROWS_HEADER_BYTES)
        return lw__errorf(err, LW_ERR_OVERLAP, "row file: rows at %llu overlap the manifest",
                          (unsigned long long)m->data_off);
    if (m->src_bytes != total)
        return lw__errorf(err, LW_ERR_BAD_DIMS, "row file: source of %llu bytes for %llu bytes of rows",
                          (unsigned long long)m->src_bytes, (unsigned long long)total);
    if (!memchr(m->name, 0, LW__ROWS_NAME_MAX))
        return lw__errorf(err, LW_ERR_BAD_STRING, "row file: tensor name not terminated");
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Opening and writing
 * ------------------------------------------------------------------------------------------------------- */

/* Streams the source tensor through h, and into fd at LW__ROWS_HEADER_BYTES when fd >= 0. */
static lw_status stream_source(const lw__rows_spec *sp, uint64_t total, uint8_t *buf, size_t cap, int fd,
                               lw__rows_hash *h, char *err) {
    lw__rows_hash_init(h);
    for (uint64_t done = 0; done < total;) {
        const size_t n = total - done < cap ? (size_t)(total - done) : cap;
        lw_status st = lw_source_read(sp->src, sp->src_off + done, buf, n);
        if (st != LW_OK)
            return lw__errorf(err, st, "reading %s at %llu: %s", sp->name,
                              (unsigned long long)(sp->src_off + done), lw_source_error(sp->src));
        lw__rows_hash_update(h, buf, n);
        for (size_t w = 0; fd >= 0 && w < n;) {
            ssize_t put = pwrite(fd, buf + w, n - w, (off_t)(LW__ROWS_HEADER_BYTES + done + w));
            if (put < 0 && errno == EINTR) continue;
            if (put <= 0)
                return lw__errorf(err, LW_ERR_IO, "writing the row file: %s",
                                  put < 0 ? strerror(errno) : "no progress");
            w += (size_t)put;
        }
        done += n;
    }
    return LW_OK;
}

/* Whether the file at path (opened as *fsrc) holds exactly the table `want` describes; why says what differs.
 * *fsrc is closed and NULL when it does not. */
static int file_matches(lw_source **fsrc, const lw__rows_manifest *want, lw__rows_manifest *got, char *why) {
    uint8_t hdr[LW__ROWS_HEADER_BYTES];
    const uint64_t size = lw_source_size(*fsrc);
    char err[LW_ERRMSG_SIZE];
    int ok = 0;
    if (size < LW__ROWS_HEADER_BYTES) {
        snprintf(why, LW_ERRMSG_SIZE, "truncated: %llu bytes, shorter than the manifest",
                 (unsigned long long)size);
    } else if (lw_source_read(*fsrc, 0, hdr, sizeof hdr) != LW_OK) {
        snprintf(why, LW_ERRMSG_SIZE, "manifest unreadable: %s", lw_source_error(*fsrc));
    } else if (lw__rows_manifest_decode(hdr, sizeof hdr, got, err) != LW_OK) {
        snprintf(why, LW_ERRMSG_SIZE, "%s", err);
    } else if (got->row_bytes != want->row_bytes || got->n_rows != want->n_rows || got->type != want->type) {
        snprintf(why, LW_ERRMSG_SIZE,
                 "layout differs: %llu rows of %llu bytes, type %u (want %llu of %llu, %u)",
                 (unsigned long long)got->n_rows, (unsigned long long)got->row_bytes, got->type,
                 (unsigned long long)want->n_rows, (unsigned long long)want->row_bytes, want->type);
    } else if (strcmp(got->name, want->name) || got->src_off != want->src_off ||
               got->src_bytes != want->src_bytes) {
        snprintf(why, LW_ERRMSG_SIZE, "source tensor differs (%s at %llu)", got->name,
                 (unsigned long long)got->src_off);
    } else if (got->fingerprint != want->fingerprint) {
        snprintf(why, LW_ERRMSG_SIZE, "fingerprint %016llx, the source's bytes now %016llx",
                 (unsigned long long)got->fingerprint, (unsigned long long)want->fingerprint);
    } else if (size != got->data_off + got->src_bytes) {
        snprintf(why, LW_ERRMSG_SIZE, "size %llu bytes, the manifest says %llu", (unsigned long long)size,
                 (unsigned long long)(got->data_off + got->src_bytes));
    } else {
        ok = 1;
    }
    if (!ok) {
        lw_source_close(*fsrc);
        *fsrc = NULL;
    }
    return ok;
}

/* Writes the table into tmp and renames it to path. The manifest goes in last, after the rows, so a file cut
 * short at any point fails its checks. */
static lw_status write_file(const lw__rows_spec *sp, const lw__rows_manifest *man, const char *path,
                            const char *tmp, uint8_t *buf, size_t cap, char *err) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return lw__errorf(err, LW_ERR_IO, "creating %s: %s", tmp, strerror(errno));
    lw__rows_hash h;
    lw_status st = stream_source(sp, man->src_bytes, buf, cap, fd, &h, err);
    if (st == LW_OK && lw__rows_hash_final(&h) != man->fingerprint)
        st = lw__errorf(err, LW_ERR_IO, "the source of %s changed while its row file was written", sp->name);
    if (st == LW_OK) {
        uint8_t hdr[LW__ROWS_HEADER_BYTES];
        lw__rows_manifest_encode(man, hdr);
        ssize_t put;
        do put = pwrite(fd, hdr, sizeof hdr, 0);
        while (put < 0 && errno == EINTR);
        if (put != (ssize_t)sizeof hdr)
            st = lw__errorf(err, LW_ERR_IO, "writing the manifest of %s: %s", tmp,
                            put < 0 ? strerror(errno) : "short write");
    }
    if (st == LW_OK && fsync(fd) != 0) st = lw__errorf(err, LW_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && st == LW_OK) st = lw__errorf(err, LW_ERR_IO, "close %s: %s", tmp, strerror(errno));
    if (st == LW_OK && rename(tmp, path) != 0)
        st = lw__errorf(err, LW_ERR_IO, "renaming %s to %s: %s", tmp, path, strerror(errno));
    if (st != LW_OK) unlink(tmp);
    return st;
}

lw_status lw__rowfile_open(const lw_allocator *alloc, const lw__rows_spec *sp, const char *path,
                           lw__rowfile **out, char *err) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (!sp || !sp->src || !sp->name || !path)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "row file: missing source, name or path");
    lw__rows_manifest want = {0};
    want.version = LW__ROWS_VERSION;
    want.type = sp->type;
    want.row_bytes = sp->row_bytes;
    want.n_rows = sp->n_rows;
    want.data_off = LW__ROWS_HEADER_BYTES;
    want.src_off = sp->src_off;
    uint64_t end;
    if (sp->row_bytes == 0 || sp->row_bytes > LW__ROWS_MAX_ROW || sp->n_rows == 0 ||
        sp->n_rows > LW__ROWS_MAX_COUNT)
        return lw__errorf(err, LW_ERR_TOO_LARGE, "row file: %llu rows of %llu bytes are outside the limits",
                          (unsigned long long)sp->n_rows, (unsigned long long)sp->row_bytes);
    if (!lw__mul_u64(sp->row_bytes, sp->n_rows, &want.src_bytes) ||
        !lw__add_u64(sp->src_off, want.src_bytes, &end) || end > lw_source_size(sp->src))
        return lw__errorf(err, LW_ERR_OUT_OF_FILE,
                          "row file: %s (%llu rows of %llu bytes at %llu) passes the "
                          "end of its source",
                          sp->name, (unsigned long long)sp->n_rows, (unsigned long long)sp->row_bytes,
                          (unsigned long long)sp->src_off);
    if (strlen(sp->name) >= LW__ROWS_NAME_MAX)
        return lw__errorf(err, LW_ERR_BAD_STRING, "row file: tensor name too long");
    strcpy(want.name, sp->name);

    lw_allocator a = lw__allocator_or_default(alloc);
    const size_t cap = sp->chunk_bytes ? sp->chunk_bytes : (size_t)1 << 20;
    lw__rowfile *rf = lw__calloc(&a, 1, sizeof(*rf));
    if (rf) rf->alloc = a; /* first: a failure below frees rf through it */
    uint8_t *buf = lw__malloc(&a, cap);
    size_t tmp_len = strlen(path) + 32;
    char *tmp = lw__malloc(&a, tmp_len);
    lw_status st = LW_OK;
    if (!rf || !buf || !tmp) {
        st = lw__errorf(err, LW_ERR_NOMEM, "out of memory for the row file of %s", sp->name);
        goto done;
    }
    /* the source's fingerprint now: what a reusable file must carry */
    lw__rows_hash h;
    if ((st = stream_source(sp, want.src_bytes, buf, cap, -1, &h, err)) != LW_OK) goto done;
    want.fingerprint = lw__rows_hash_final(&h);

    char open_err[LW_ERRMSG_SIZE];
    lw_source *fsrc = NULL;
    const lw_status ost = lw_source_open_file(path, &a, &fsrc, open_err, sizeof open_err);
    if (ost == LW_ERR_NOMEM) {
        st = lw__errorf(err, ost, "out of memory opening the row file");
        goto done;
    }
    const int existed = ost == LW_OK; /* else absent or unreadable: (re)written */
    if (existed && file_matches(&fsrc, &want, &rf->man, rf->why)) {
        rf->src = fsrc;
        rf->outcome = LW__ROWS_REUSED;
        goto done;
    }
    rf->outcome = existed ? LW__ROWS_REWRITTEN : LW__ROWS_CREATED;
    snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    if ((st = write_file(sp, &want, path, tmp, buf, cap, err)) != LW_OK) goto done;
    if ((st = lw_source_open_file(path, &a, &rf->src, open_err, sizeof open_err)) != LW_OK) {
        st = lw__errorf(err, st, "reopening the row file: %s", open_err);
        goto done;
    }
    if (!file_matches(&rf->src, &want, &rf->man, open_err)) /* written by someone else meanwhile, or bad */
        st = lw__errorf(err, LW_ERR_IO, "the row file just written does not check: %s", open_err);
done:
    lw__free(&a, buf);
    lw__free(&a, tmp);
    if (st != LW_OK) {
        lw__rowfile_close(rf);
        return st;
    }
    if (rf->outcome != LW__ROWS_REWRITTEN) rf->why[0] = 0;
    *out = rf;
    return LW_OK;
}

void lw__rowfile_close(lw__rowfile *rf) {
    if (!rf) return;
    lw_source_close(rf->src);
    lw_allocator a = rf->alloc;
    lw__free(&a, rf);
}

const lw__rows_manifest *lw__rowfile_manifest(const lw__rowfile *rf) {
    return &rf->man;
}
lw__rows_outcome lw__rowfile_outcome(const lw__rowfile *rf) {
    return rf->outcome;
}
const char *lw__rowfile_why(const lw__rowfile *rf) {
    return rf->why;
}

lw_status lw__rowfile_read(lw__rowfile *rf, uint64_t first, uint64_t count, void *dst, char *err) {
    uint64_t end, off, bytes;
    if (!lw__add_u64(first, count, &end) || end > rf->man.n_rows)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "rows %llu..%llu outside the table of %llu",
                          (unsigned long long)first, (unsigned long long)end,
                          (unsigned long long)rf->man.n_rows);
    /* in range: the manifest's checks bound these products */
    off = rf->man.data_off + first * rf->man.row_bytes;
    bytes = count * rf->man.row_bytes;
    if (bytes > SIZE_MAX) return lw__errorf(err, LW_ERR_TOO_LARGE, "read too large");
    lw_status st = lw_source_read(rf->src, off, dst, (size_t)bytes);
    if (st != LW_OK) return lw__errorf(err, st, "row file: %s", lw_source_error(rf->src));
    return LW_OK;
}

lw_status lw__rows_mkdirs(const char *dir, char *err) {
    char p[4096];
    const size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return lw__errorf(err, LW_ERR_INVALID_ARG, "bad directory name");
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        const char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            lw_status st = lw__errorf(err, LW_ERR_IO, "creating %s: %s", p, strerror(errno));
            return st;
        }
        p[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return lw__errorf(err, LW_ERR_IO, "%s is not a directory", dir);
    return LW_OK;
}
