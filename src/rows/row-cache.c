/* The row cache: N slots of a row file's rows, an O(1) LRU (direct id -> slot array, doubly linked slot
 * list with the most recently used at the head), loads by positioned reads of the row file (see rows.h).
 * Everything is allocated at creation; lookups only read rows into slots. */
#include "rows/rows.h"

#include <string.h>

struct lw__rowcache {
    lw_allocator alloc;           /* allocator this object was made with                          */
    lw__rowfile *rf;              /* the rows (not owned); NULL: a mirror (rows live elsewhere)    */
    uint64_t row_bytes;           /* bytes per row                                                */
    uint32_t n_rows;              /* rows in the table (ids 0..n_rows-1)                           */
    uint32_t n_slots;             /* rows held                                                    */
    uint8_t *rows;                /* n_slots x row_bytes: the slots' bytes (NULL: a mirror)        */
    uint32_t *id_slot;            /* n_rows: the slot holding each id, LW__ROWS_NONE when none     */
    uint32_t *slot_id;            /* n_slots: the id each slot holds, LW__ROWS_NONE when free      */
    uint32_t *prev, *next;        /* n_slots each: the LRU list (LW__ROWS_NONE ends it)            */
    uint32_t *stamp;              /* n_slots: the lookup that last touched each slot               */
    uint32_t head, tail;          /* most and least recently used slots                           */
    uint32_t epoch;               /* the current lookup's stamp (never 0 once one ran)             */
    lw__rowcache_load_fn on_load; /* optional hook after each load (a GPU mirror)                  */
    void *user;                   /* its argument                                                  */
    lw__rowcache_stats stats;     /* counters                                                      */
    char err[LW_ERRMSG_SIZE];     /* message of the last failed call                               */
};

/* ---------------------------------------------------------------------------------------------------------
 * The LRU list
 * ------------------------------------------------------------------------------------------------------- */

static void unlink_slot(lw__rowcache *rc, uint32_t s) {
    const uint32_t p = rc->prev[s], n = rc->next[s];
    if (p != LW__ROWS_NONE)
        rc->next[p] = n;
    else
        rc->head = n;
    if (n != LW__ROWS_NONE)
        rc->prev[n] = p;
    else
        rc->tail = p;
    rc->prev[s] = rc->next[s] = LW__ROWS_NONE;
}

static void push_front(lw__rowcache *rc, uint32_t s) {
    rc->prev[s] = LW__ROWS_NONE;
    rc->next[s] = rc->head;
    if (rc->head != LW__ROWS_NONE) rc->prev[rc->head] = s;
    rc->head = s;
    if (rc->tail == LW__ROWS_NONE) rc->tail = s;
}

static void push_back(lw__rowcache *rc, uint32_t s) {
    rc->next[s] = LW__ROWS_NONE;
    rc->prev[s] = rc->tail;
    if (rc->tail != LW__ROWS_NONE) rc->next[rc->tail] = s;
    rc->tail = s;
    if (rc->head == LW__ROWS_NONE) rc->head = s;
}

/* ---------------------------------------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__rowcache_create(const lw_allocator *alloc, lw__rowfile *rf, uint32_t n_slots,
                              lw__rowcache_load_fn on_load, void *user, lw__rowcache **out, char *err) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (!rf) return lw__errorf(err, LW_ERR_INVALID_ARG, "row cache: no row file");
    const lw__rows_manifest *m = lw__rowfile_manifest(rf);
    if (n_slots == 0 || n_slots > m->n_rows)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "row cache: %u slots for a table of %llu rows", n_slots,
                          (unsigned long long)m->n_rows);
    size_t bytes;
    if (m->row_bytes > SIZE_MAX || !lw__mul_size((size_t)m->row_bytes, n_slots, &bytes))
        return lw__errorf(err, LW_ERR_OVERFLOW, "row cache: %u slots of %llu bytes overflow", n_slots,
                          (unsigned long long)m->row_bytes);
    lw_allocator a = lw__allocator_or_default(alloc);
    lw__rowcache *rc = lw__calloc(&a, 1, sizeof(*rc));
    if (!rc) return lw__errorf(err, LW_ERR_NOMEM, "out of memory for the row cache");
    rc->alloc = a;
    rc->rf = rf;
    rc->row_bytes = m->row_bytes;
    rc->n_rows = (uint32_t)m->n_rows; /* <= LW__ROWS_MAX_COUNT: the manifest was validated */
    rc->n_slots = n_slots;
    rc->on_load = on_load;
    rc->user = user;
    rc->rows = lw__malloc(&a, bytes ? bytes : 1);
    rc->id_slot = lw__calloc(&a, rc->n_rows, sizeof(uint32_t));
    rc->slot_id = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->prev = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->next = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->stamp = lw__calloc(&a, n_slots, sizeof(uint32_t));
    if (!rc->rows || !rc->id_slot || !rc->slot_id || !rc->prev || !rc->next || !rc->stamp) {
        lw__rowcache_free(rc);
        return lw__errorf(err, LW_ERR_NOMEM, "out of memory for a row cache of %u x %llu bytes", n_slots,
                          (unsigned long long)m->row_bytes);
    }
    for (uint32_t i = 0; i < rc->n_rows; i++) rc->id_slot[i] = LW__ROWS_NONE;
    rc->head = rc->tail = LW__ROWS_NONE;
    for (uint32_t s = 0; s < n_slots; s++) { /* every slot on the list, free ones evicted first */
        rc->slot_id[s] = LW__ROWS_NONE;
        push_back(rc, s);
    }
    *out = rc;
    return LW_OK;
}

lw_status lw__rowcache_create_mirror(const lw_allocator *alloc, uint32_t n_rows, uint64_t row_bytes,
                                     uint32_t n_slots, lw__rowcache_load_fn on_load, void *user,
                                     lw__rowcache **out, char *err) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (n_rows == 0 || n_rows > LW__ROWS_MAX_COUNT || row_bytes == 0 || row_bytes > LW__ROWS_MAX_ROW ||
        n_slots == 0 || n_slots > n_rows)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "row cache: %u slots of %llu bytes for a table of %u rows",
                          n_slots, (unsigned long long)row_bytes, n_rows);
    lw_allocator a = lw__allocator_or_default(alloc);
    lw__rowcache *rc = lw__calloc(&a, 1, sizeof(*rc));
    if (!rc) return lw__errorf(err, LW_ERR_NOMEM, "out of memory for the row cache");
    rc->alloc = a;
    rc->row_bytes = row_bytes;
    rc->n_rows = n_rows;
    rc->n_slots = n_slots;
    rc->on_load = on_load;
    rc->user = user;
    rc->id_slot = lw__calloc(&a, rc->n_rows, sizeof(uint32_t));
    rc->slot_id = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->prev = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->next = lw__calloc(&a, n_slots, sizeof(uint32_t));
    rc->stamp = lw__calloc(&a, n_slots, sizeof(uint32_t));
    if (!rc->id_slot || !rc->slot_id || !rc->prev || !rc->next || !rc->stamp) {
        lw__rowcache_free(rc);
        return lw__errorf(err, LW_ERR_NOMEM, "out of memory for a row cache map of %u rows", n_rows);
    }
    for (uint32_t i = 0; i < rc->n_rows; i++) rc->id_slot[i] = LW__ROWS_NONE;
    rc->head = rc->tail = LW__ROWS_NONE;
    for (uint32_t s = 0; s < n_slots; s++) {
        rc->slot_id[s] = LW__ROWS_NONE;
        push_back(rc, s);
    }
    *out = rc;
    return LW_OK;
}

void lw__rowcache_free(lw__rowcache *rc) {
    if (!rc) return;
    lw_allocator a = rc->alloc;
    lw__free(&a, rc->rows);
    lw__free(&a, rc->id_slot);
    lw__free(&a, rc->slot_id);
    lw__free(&a, rc->prev);
    lw__free(&a, rc->next);
    lw__free(&a, rc->stamp);
    lw__free(&a, rc);
}

const char *lw__rowcache_error(const lw__rowcache *rc) {
    return rc ? rc->err : "out of memory";
}

/* ---------------------------------------------------------------------------------------------------------
 * Lookups
 * ------------------------------------------------------------------------------------------------------- */

/* Makes id resident, touched by the current epoch; warm: count it as a warm load instead of a lookup. */
static lw_status touch(lw__rowcache *rc, uint32_t id, int warm, uint32_t *slot) {
    uint32_t s = rc->id_slot[id];
    if (!warm) rc->stats.lookups++;
    if (s != LW__ROWS_NONE) {
        if (!warm) rc->stats.hits++;
        unlink_slot(rc, s);
        push_front(rc, s);
        rc->stamp[s] = rc->epoch;
        *slot = s;
        return LW_OK;
    }
    s = rc->tail;
    if (rc->stamp[s] == rc->epoch && rc->epoch != 0) /* every slot already holds a row this call needs */
        return lw__errorf(rc->err, LW_ERR_TOO_LARGE,
                          "row cache: one lookup needs more distinct rows than its %u slots", rc->n_slots);
    const uint32_t old = rc->slot_id[s];
    if (old != LW__ROWS_NONE) {
        rc->id_slot[old] = LW__ROWS_NONE;
        rc->slot_id[s] = LW__ROWS_NONE;
        rc->stats.evictions++;
    }
    uint8_t *dst = rc->rows ? rc->rows + (size_t)s * (size_t)rc->row_bytes : NULL; /* NULL: a mirror */
    lw_status st = rc->rf ? lw__rowfile_read(rc->rf, id, 1, dst, rc->err) : LW_OK;
    if (st != LW_OK) return st; /* the slot stays free at the tail */
    rc->slot_id[s] = id;
    rc->id_slot[id] = s;
    unlink_slot(rc, s);
    push_front(rc, s);
    rc->stamp[s] = rc->epoch;
    rc->stats.bytes_read += rc->row_bytes;
    if (warm)
        rc->stats.warm_loads++;
    else
        rc->stats.misses++;
    if (rc->on_load) rc->on_load(rc->user, s, id, old, dst, (size_t)rc->row_bytes);
    *slot = s;
    return LW_OK;
}

/* A new stamp for a call; on wrap-around every old stamp is cleared so none equals the new one. */
static void next_epoch(lw__rowcache *rc) {
    if (++rc->epoch == 0) {
        memset(rc->stamp, 0, (size_t)rc->n_slots * sizeof(uint32_t));
        rc->epoch = 1;
    }
}

lw_status lw__rowcache_lookup(lw__rowcache *rc, const int32_t *ids, size_t n, uint32_t *slots) {
    if (!rc || (!ids && n)) return LW_ERR_INVALID_ARG;
    next_epoch(rc);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= rc->n_rows)
            return lw__errorf(rc->err, LW_ERR_INVALID_ARG, "row cache: id %d outside the table of %u rows",
                              ids[i], rc->n_rows);
        uint32_t s = 0;
        lw_status st = touch(rc, (uint32_t)ids[i], 0, &s);
        if (st != LW_OK) return st;
        if (slots) slots[i] = s;
    }
    return LW_OK;
}

lw_status lw__rowcache_warm(lw__rowcache *rc, uint32_t first, uint32_t count) {
    if (!rc) return LW_ERR_INVALID_ARG;
    if (first >= rc->n_rows) return LW_OK;
    if (count > rc->n_rows - first) count = rc->n_rows - first;
    if (count > rc->n_slots) count = rc->n_slots;
    next_epoch(rc);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t s = 0;
        lw_status st = touch(rc, first + i, 1, &s);
        if (st != LW_OK) return st;
    }
    return LW_OK;
}

bool lw__rowcache_touch_resident(lw__rowcache *rc, uint32_t id) {
    if (!rc || id >= rc->n_rows || rc->id_slot[id] == LW__ROWS_NONE) return false;
    uint32_t s = 0;
    next_epoch(rc);
    return touch(rc, id, 0, &s) == LW_OK; /* resident: a hit, which cannot fail */
}

const uint8_t *lw__rowcache_row(const lw__rowcache *rc, uint32_t slot) {
    return slot < rc->n_slots && rc->rows ? rc->rows + (size_t)slot * (size_t)rc->row_bytes : NULL;
}
const uint32_t *lw__rowcache_id_slots(const lw__rowcache *rc) {
    return rc->id_slot;
}
uint32_t lw__rowcache_n_slots(const lw__rowcache *rc) {
    return rc->n_slots;
}
uint64_t lw__rowcache_row_bytes(const lw__rowcache *rc) {
    return rc->row_bytes;
}
void lw__rowcache_get_stats(const lw__rowcache *rc, lw__rowcache_stats *out) {
    *out = rc->stats;
}
