/* Row store (ARCHITECTURE.md invariant 7): a table of fixed-size rows (token embeddings, per-layer
 * embeddings, MoE experts) kept in a file of its own and served, a few rows at a time, into a small cache,
 * so the table can exceed the memory budget.
 *
 * - A row file holds the rows one after another behind a 4 KiB manifest (layout version, row size, row
 *   count, tensor type, a 64-bit fingerprint of the source tensor's bytes, the source tensor's name, offset
 *   and size). It is written once by streaming the tensor from the model's byte source in bounded chunks,
 *   reused while the manifest matches what the source holds now, and rewritten when it does not (another
 *   fingerprint, a truncated or resized file, a damaged manifest). It is written under a temporary name and
 *   renamed into place, so a crash never leaves a complete-looking stale file.
 * - A row cache keeps N of the rows in memory: an O(1) LRU over a direct id -> slot array and a doubly
 *   linked list of slots, loading missing rows with positioned reads of the row file (lw_source). It does
 *   not know what the table means. Every load is reported to an optional hook (slot, id, bytes), which is
 *   where a GPU mirror writes the row into its buffer and updates its id -> slot table.
 *
 * Internal names are lw__*; the public surface is lw_model_params.rows_* and lw_rows_stats. */
#ifndef LW_ROWS_H
#define LW_ROWS_H

#include "core/core.h"

#include <stdbool.h>

/* ---------------------------------------------------------------------------------------------------------
 * Manifest
 * ------------------------------------------------------------------------------------------------------- */

#define LW__ROWS_VERSION      1u         /* layout version written and the only one read            */
#define LW__ROWS_HEADER_BYTES 4096u      /* manifest block; the rows start here (page aligned)        */
#define LW__ROWS_NAME_MAX     64u        /* source tensor name, NUL included (GGUF's limit)           */
#define LW__ROWS_MAX_ROW      (1u << 30) /* bytes of one row at most: a row is read in one call       */
#define LW__ROWS_MAX_COUNT    (1u << 31) /* rows at most: ids are int32                               */
#define LW__ROWS_NONE         UINT32_MAX /* "no slot" / "no id" in the cache's maps                   */

/* What a row file says about itself (and what a caller expects it to say). */
typedef struct lw__rows_manifest {
    uint32_t version;             /* LW__ROWS_VERSION                                         */
    uint32_t type;                /* lw_type of the rows (a row is whole blocks of it)         */
    uint64_t row_bytes;           /* bytes per row                                            */
    uint64_t n_rows;              /* rows in the file                                         */
    uint64_t data_off;            /* offset of row 0 in the file (LW__ROWS_HEADER_BYTES)       */
    uint64_t fingerprint;         /* lw__rows_hash of the source tensor's bytes                */
    uint64_t src_off;             /* the source tensor's offset in its byte source             */
    uint64_t src_bytes;           /* its size (= row_bytes * n_rows)                            */
    char name[LW__ROWS_NAME_MAX]; /* the source tensor's name, NUL-terminated                  */
} lw__rows_manifest;

/* Writes m into the LW__ROWS_HEADER_BYTES block out (with its checksum). Does not validate m: tests use it
 * to build hostile manifests. */
void lw__rows_manifest_encode(const lw__rows_manifest *m, uint8_t *out);
/* Parses and validates a manifest block of n bytes: magic, version, checksum, and every size (row size and
 * count non-zero and within limits, their product and the end of the data without overflow). err gets a
 * message (LW_ERRMSG_SIZE bytes). */
lw_status lw__rows_manifest_decode(const uint8_t *buf, size_t n, lw__rows_manifest *m, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Fingerprint: a streaming 64-bit hash (8-byte words, multiply-xorshift), the same whatever the chunking.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__rows_hash {
    uint64_t h;      /* running state                                   */
    uint64_t len;    /* bytes hashed so far                             */
    uint8_t tail[8]; /* bytes of an incomplete word carried to the next */
    uint32_t n_tail; /* how many of tail are used                       */
} lw__rows_hash;

void lw__rows_hash_init(lw__rows_hash *s);
void lw__rows_hash_update(lw__rows_hash *s, const void *p, size_t n);
uint64_t lw__rows_hash_final(const lw__rows_hash *s);

/* ---------------------------------------------------------------------------------------------------------
 * Row file
 * ------------------------------------------------------------------------------------------------------- */

/* The table to store: a tensor of n_rows rows of row_bytes in src at src_off. */
typedef struct lw__rows_spec {
    lw_source *src;     /* the model's byte source (read only, in chunks)                  */
    uint64_t src_off;   /* absolute offset of the tensor in src                           */
    uint64_t row_bytes; /* bytes per row                                                   */
    uint64_t n_rows;    /* rows                                                            */
    uint32_t type;      /* lw_type of the rows                                             */
    const char *name;   /* tensor name (< LW__ROWS_NAME_MAX bytes)                         */
    size_t chunk_bytes; /* streaming buffer size (0: 1 MiB); bounds the memory writing takes */
} lw__rows_spec;

typedef struct lw__rowfile lw__rowfile;

/* How lw__rowfile_open found the file. */
typedef enum {
    LW__ROWS_REUSED = 0, /* the manifest matched: nothing written          */
    LW__ROWS_CREATED,    /* there was no file: written                     */
    LW__ROWS_REWRITTEN,  /* there was a stale one (see lw__rowfile_why)     */
} lw__rows_outcome;

/* Opens the row file at path for the table spec describes: reuses it when its manifest matches the source's
 * bytes now (fingerprint, sizes, type, name, offset), else (re)writes it by streaming the tensor in
 * spec->chunk_bytes pieces into path.tmp.<pid> and renaming that over path. Every row file read goes through
 * an lw_source over the file. On failure *out is NULL, nothing is left at the temporary name, and err
 * (LW_ERRMSG_SIZE bytes) says why. */
lw_status lw__rowfile_open(const lw_allocator *alloc, const lw__rows_spec *spec, const char *path,
                           lw__rowfile **out, char *err);
void lw__rowfile_close(lw__rowfile *rf);
const lw__rows_manifest *lw__rowfile_manifest(const lw__rowfile *rf);
lw__rows_outcome lw__rowfile_outcome(const lw__rowfile *rf);
/* Why an existing file was rewritten ("" when reused or created). */
const char *lw__rowfile_why(const lw__rowfile *rf);
/* Reads count rows from row first into dst (positioned read of the file). */
lw_status lw__rowfile_read(lw__rowfile *rf, uint64_t first, uint64_t count, void *dst, char *err);

/* Creates the directories of path that are missing (mkdir -p of its parent). */
lw_status lw__rows_mkdirs(const char *dir, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Row cache
 * ------------------------------------------------------------------------------------------------------- */

/* Called after a row was loaded into a slot (also by warming): the hook of a GPU mirror, which writes the
 * row to its slot of a GPU buffer and sets id -> slot in its table (and slot's old id to none). */
typedef void (*lw__rowcache_load_fn)(void *user, uint32_t slot, uint32_t id, uint32_t evicted_id,
                                     const void *row, size_t row_bytes);

/* Counters since creation. */
typedef struct lw__rowcache_stats {
    uint64_t lookups;    /* ids looked up (each occurrence)                   */
    uint64_t hits;       /* of them found in a slot                           */
    uint64_t misses;     /* of them loaded from the file                      */
    uint64_t warm_loads; /* rows loaded by lw__rowcache_warm                   */
    uint64_t evictions;  /* loads that replaced a resident row                 */
    uint64_t bytes_read; /* bytes read from the row file (warming included)    */
} lw__rowcache_stats;

typedef struct lw__rowcache lw__rowcache;

/* A cache of n_slots rows of rf (not owned; must outlive the cache); 1 <= n_slots <= its rows. Everything is
 * allocated here: lookups allocate nothing. err: LW_ERRMSG_SIZE bytes. */
lw_status lw__rowcache_create(const lw_allocator *alloc, lw__rowfile *rf, uint32_t n_slots,
                              lw__rowcache_load_fn on_load, void *user, lw__rowcache **out, char *err);
void lw__rowcache_free(lw__rowcache *rc);
/* A cache that keeps no bytes of its own (a mirror): the map, the LRU and the counters only, for rows that
 * live elsewhere (a GPU buffer filled from the model's byte source). A miss reads nothing; it calls on_load
 * with row NULL (and row_bytes), whose job is to bring the row into that slot; bytes_read counts what the
 * hook was asked to bring. n_rows <= LW__ROWS_MAX_COUNT, 1 <= n_slots <= n_rows; err: LW_ERRMSG_SIZE. */
lw_status lw__rowcache_create_mirror(const lw_allocator *alloc, uint32_t n_rows, uint64_t row_bytes,
                                     uint32_t n_slots, lw__rowcache_load_fn on_load, void *user,
                                     lw__rowcache **out, char *err);
/* Whether id is resident now; when it is, counts a lookup and a hit and marks it most recently used, as a
 * lookup of it would (a GPU step that already gathered it through the map, checked afterwards); when it is
 * not, changes and counts nothing. */
bool lw__rowcache_touch_resident(lw__rowcache *rc, uint32_t id);

const char *lw__rowcache_error(const lw__rowcache *rc);
/* Makes every id of ids[0..n) resident at once and writes their slots (slots may be NULL). Ids are marked
 * most recently used in order; a miss evicts the least recently used row that this call has not touched.
 * LW_ERR_TOO_LARGE when ids holds more distinct ids than slots (what was loaded stays valid),
 * LW_ERR_INVALID_ARG for an id outside the table, the read's status when the file fails. */
lw_status lw__rowcache_lookup(lw__rowcache *rc, const int32_t *ids, size_t n, uint32_t *slots);
/* Loads rows [first, first + count) (clipped to the table and to the slots) as if looked up in order, but
 * counted as warm loads rather than misses: the rows a caller expects to need most. */
lw_status lw__rowcache_warm(lw__rowcache *rc, uint32_t first, uint32_t count);
/* The bytes of a slot's row (valid until a later lookup evicts it). */
const uint8_t *lw__rowcache_row(const lw__rowcache *rc, uint32_t slot);
/* id -> slot (LW__ROWS_NONE when not resident), n_rows entries: what a GPU mirror uploads. */
const uint32_t *lw__rowcache_id_slots(const lw__rowcache *rc);
uint32_t lw__rowcache_n_slots(const lw__rowcache *rc);
uint64_t lw__rowcache_row_bytes(const lw__rowcache *rc);
void lw__rowcache_get_stats(const lw__rowcache *rc, lw__rowcache_stats *out);

#endif
