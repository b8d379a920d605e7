/* GGUF facts shared by reader and writer: value type sizes and names, tensor shape validation. */
#include "gguf/gguf-internal.h"

#include <inttypes.h>

static const struct {
    const char *name;  /* short name used by `llamaweb info`                 */
    uint8_t file_size; /* bytes in the file per element (0: variable length) */
    uint8_t mem_size;  /* bytes per element in a packed in-memory array      */
} value_types[LW_GGUF_TYPE_COUNT] = {
    [LW_GGUF_UINT8] = {"u8", 1, 1},     [LW_GGUF_INT8] = {"i8", 1, 1},
    [LW_GGUF_UINT16] = {"u16", 2, 2},   [LW_GGUF_INT16] = {"i16", 2, 2},
    [LW_GGUF_UINT32] = {"u32", 4, 4},   [LW_GGUF_INT32] = {"i32", 4, 4},
    [LW_GGUF_FLOAT32] = {"f32", 4, 4},  [LW_GGUF_BOOL] = {"bool", 1, 1},
    [LW_GGUF_STRING] = {"str", 0, sizeof(lw_gguf_str)},
    [LW_GGUF_ARRAY] = {"arr", 0, sizeof(lw_gguf_value)},
    [LW_GGUF_UINT64] = {"u64", 8, 8},   [LW_GGUF_INT64] = {"i64", 8, 8},
    [LW_GGUF_FLOAT64] = {"f64", 8, 8},
};

const char *lw_gguf_type_name(lw_gguf_type t) {
    return (unsigned)t < LW_GGUF_TYPE_COUNT ? value_types[t].name : "?";
}

size_t lw__gguf_scalar_size(lw_gguf_type t) {
    return (unsigned)t < LW_GGUF_TYPE_COUNT ? value_types[t].file_size : 0;
}

size_t lw__gguf_elem_mem_size(lw_gguf_type t) {
    return (unsigned)t < LW_GGUF_TYPE_COUNT ? value_types[t].mem_size : 0;
}

size_t lw__gguf_min_file_size(lw_gguf_type t) {
    if (t == LW_GGUF_STRING) return 8;      /* u64 length, may be empty     */
    if (t == LW_GGUF_ARRAY) return 4 + 8;   /* u32 element type, u64 count  */
    return lw__gguf_scalar_size(t);
}

lw_status lw__gguf_check_tensor(char *err, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                uint64_t *n_elements, uint64_t *n_bytes) {
    if (n_dims > LW_GGUF_MAX_DIMS)
        return lw__errorf(err, LW_ERR_BAD_DIMS, "tensor '%s': %" PRIu32 " dimensions, at most %d", name, n_dims,
                          LW_GGUF_MAX_DIMS);
    const lw_type_info *ti = lw_type_get(type);
    if (!ti) return lw__errorf(err, LW_ERR_BAD_TENSOR_TYPE, "tensor '%s': unknown type id %" PRIu32, name, type);
    uint64_t n = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        if (ne[j] < 0)
            return lw__errorf(err, LW_ERR_BAD_DIMS, "tensor '%s': dimension %" PRIu32 " is negative (%" PRId64 ")",
                              name, j, ne[j]);
        if (!lw__mul_u64(n, (uint64_t)ne[j], &n) || n > (uint64_t)INT64_MAX)
            return lw__errorf(err, LW_ERR_OVERFLOW, "tensor '%s': element count overflows at dimension %" PRIu32,
                              name, j);
    }
    int64_t ne0 = n_dims > 0 ? ne[0] : 1;
    if (ne0 % ti->block_size != 0)
        return lw__errorf(err, LW_ERR_BAD_DIMS,
                          "tensor '%s': row of %" PRId64 " elements is not a multiple of %s's block size %" PRIu32,
                          name, ne0, ti->name, ti->block_size);
    uint64_t bytes;
    if (!lw__mul_u64(n / ti->block_size, ti->type_size, &bytes) || bytes > (uint64_t)INT64_MAX)
        return lw__errorf(err, LW_ERR_OVERFLOW, "tensor '%s': byte size overflows", name);
    *n_elements = n;
    *n_bytes = bytes;
    return LW_OK;
}
