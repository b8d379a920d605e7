/* CPU reference for the wasm kernel checks (see lw-wasm-ref.h). Compiled only by the wasm build. */
#include "lw-wasm-ref.h"

#include "cpu/engine-ops.h"

#include "quant/quant-iq.h"
#include "quant/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

float lw_wasm_rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((*s >> 8) * (2.0 / 16777216.0) - 1.0);
}

/* The IQ grid formats are tested on random valid blocks (lw__iq_random_block: every grid index and sign
 * pattern can occur) instead of quantized ones: IQ2_XXS, IQ2_XS and IQ1_S cannot be quantized without an
 * importance matrix, and the others' grid searches are slow. */
static bool random_blocks(uint32_t type) {
    return type == LW_TYPE_IQ2_XXS || type == LW_TYPE_IQ2_XS || type == LW_TYPE_IQ2_S ||
           type == LW_TYPE_IQ3_XXS || type == LW_TYPE_IQ3_S || type == LW_TYPE_IQ1_S || type == LW_TYPE_IQ1_M;
}

/* rows x k random blocks of type into wq, row r bounded by 0.25 + (r % 7) / 4 like the quantized rows. */
static lw_status random_rows(uint32_t type, int rows, int k, uint32_t *s, uint8_t *wq) {
    const lw_type_info *ti = lw_type_get(type);
    uint64_t rng = *s;
    for (int r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / ti->block_size; b++) {
            lw_status st = lw__iq_random_block(type, &rng, 0.25f + (float)(r % 7) * 0.25f, wq);
            if (st != LW_OK) return st;
            wq += ti->type_size;
        }
    return LW_OK;
}

lw_status lw_wasm_ref_weights(uint32_t type, int rows, int k, uint32_t *s, uint8_t **wq, size_t *wq_bytes,
                              float **deq, char *err) {
    *wq = NULL;
    *deq = NULL;
    lw_status st = LW_OK;
    size_t row_bytes = rows > 0 && k > 0 ? lw__row_size(type, k, &st) : 0, n;
    if (rows <= 0 || k <= 0 || st != LW_OK || !lw__mul_size((size_t)rows, (size_t)k, &n) ||
        !lw__mul_size(row_bytes, (size_t)rows, wq_bytes) || n > SIZE_MAX / sizeof(float))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "bad shape %d x %d for type %u", rows, k, type);
    float *w = malloc(n * sizeof(float));
    *deq = malloc(n * sizeof(float));
    *wq = malloc(*wq_bytes ? *wq_bytes : 1);
    if (!w || !*deq || !*wq) {
        st = lw__errorf(err, LW_ERR_NOMEM, "out of memory for %d x %d weights", rows, k);
    } else {
        for (int r = 0; r < rows; r++) {
            float scale = 0.25f + (float)(r % 7) * 0.25f;
            for (int i = 0; i < k; i++) w[(size_t)r * (size_t)k + (size_t)i] = scale * lw_wasm_rnd(s);
        }
        if (random_blocks(type))
            st = random_rows(type, rows, k, s, *wq);
        else
            st = lw__quantize(type, w, *wq, rows, k, NULL);
        if (st == LW_OK) st = lw__dequantize(type, *wq, *deq, (int64_t)n);
        if (st != LW_OK) lw__errorf(err, st, "quantize/dequantize type %u: %s", type, lw_status_str(st));
    }
    free(w);
    if (st != LW_OK) {
        free(*deq);
        free(*wq);
        *deq = NULL;
        *wq = NULL;
    }
    return st;
}

void lw_wasm_ref_matvec(const float *deq, int rows, int k, const float *x, double *y) {
    for (int r = 0; r < rows; r++) {
        const float *row = deq + (size_t)r * (size_t)k;
        double acc = 0;
        for (int i = 0; i < k; i++) acc += (double)row[i] * (double)x[i];
        y[r] = acc;
    }
}

double lw_wasm_nmse(const float *y, const double *ref, size_t n, char *err) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            lw__errorf(err, LW_ERR_INVALID_ARG, "output %zu: GPU result %g is not finite", i, (double)y[i]);
            return -1;
        }
        double d = (double)y[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

lw_status lw_wasm_cpu_product(uint32_t type, int rows, int k, const uint8_t *wq, const float *x, double *y,
                              char *err) {
    return lw_wasm_cpu_product_order(type, rows, k, wq, x, 0, y, err);
}

lw_status lw_wasm_cpu_product_order(uint32_t type, int rows, int k, const uint8_t *wq, const float *x,
                                    int repacked, double *y, char *err) {
    const lw__cpu_mm *mm = lw__cpu_mm_get(type);
    const lw_type_info *ti = lw_type_get(type), *ai = mm ? lw_type_get(mm->vec_dot_type) : NULL;
    if (!mm || !ti || !ai) return lw__errorf(err, LW_ERR_UNSUPPORTED, "no CPU product for this type");
    const size_t row_bytes = (size_t)k / ti->block_size * ti->type_size;
    const size_t a_bytes = mm->from_float ? (size_t)k / ai->block_size * ai->type_size : (size_t)k * 4;
    void *a = malloc(a_bytes);
    if (!a) return lw__errorf(err, LW_ERR_NOMEM, "out of memory");
    if (mm->from_float)
        mm->from_float(x, a, k);
    else
        memcpy(a, x, a_bytes);
    float (*dot)(int64_t, const void *, const void *) = repacked == 2 ? mm->dot_repack_gemm
                                                        : repacked    ? mm->dot_repack
                                                                      : mm->dot;
    if (!dot) {
        free(a);
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "no repacked CPU order for %s", ti->name);
    }
    for (int r = 0; r < rows; r++) y[r] = dot(k, wq + (size_t)r * row_bytes, a);
    free(a);
    return LW_OK;
}
