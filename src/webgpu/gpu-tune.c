/* Kernel tunables: the measured defaults of mat-vec and mat-mat, run-time overrides (per-key setters and a
 * JSON form), and the assembly of a variant for a device from the two. See gpu-tune.h. */
#include "webgpu/gpu-tune.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Measured defaults
 * ------------------------------------------------------------------------------------------------------- */

/* Mat-vec, every format. Measured on lavapipe (llvmpipe, 2 shared cores, heavily loaded: +-50 % run to run)
 * with 2048 x 2048 weights, one dispatch per token of 64 (node web/tune.mjs; tests/web/bench-matmat.mjs):
 * 4 rows per workgroup taking whole blocks beat 1 row of chunks by 1.5-3x on Q4_0/Q8_0/F16, and f16
 * arithmetic was 2x slower than f32 there (it is emulated); SwiftShader and the H200 under Dawn have no
 * shader-f16 at all. So f16 is opt-in ("f16": 1) and subgroups are used where offered. */
/* On the H200 (Dawn, 8192 x 8192, activations rounded as the model runs them; tests/web/bench-matvec.mjs),
 * 128 invocations for 4 rows of whole blocks gave F32 2773, F16 1736, Q8_0 800, Q4_0 691, Q4_K 379 GB/s:
 * best or within 25 % of the best per format (64 x 4: 20-45 % slower), so 128 is the default. The staged
 * variant ("stage") lost on every format there but Q6_K (361 against 215 GB/s with 1024 words, 2 rows).
 * CPU adapters (llvmpipe, SwiftShader) keep 64, what lavapipe measured best. */
static const int32_t matvec_defaults[LW_GPU_TUNE_MV_KEYS] = {
    [LW_GPU_TUNE_MV_WG] = 128, [LW_GPU_TUNE_MV_ROWS] = 4, [LW_GPU_TUNE_MV_BLOCKS] = 1,
    [LW_GPU_TUNE_MV_F16] = 0,  [LW_GPU_TUNE_MV_SG] = 1,   [LW_GPU_TUNE_MV_NORM] = 1,
    [LW_GPU_TUNE_MV_GLU] = 1,  [LW_GPU_TUNE_MV_ROPE] = 1,
};

/* Mat-mat, every format. Measured the same way (2048 x 2048, 64 tokens, f32): 64 x 64 tiles with 8 x 8 per
 * invocation (64 invocations) were the fastest or within noise of it for Q4_0, Q8_0 and F16 (0.73-0.88
 * GFLOP/s on the loaded machine vs 0.40-0.54 for 4 x 4 blocks); K steps of 32; f16 2x slower (emulated).
 * On the H200 the same tiles with 4 x 4 per invocation (256 invocations: 4x the threads in flight for a
 * prompt's few tiles) doubled prefill of the llama-3.2-1b shape (`node web/cli.mjs bench -p 512`, pp512
 * t/s, 8 x 8 -> 4 x 4): Q4_0 2328 -> 4557, Q8_0 2169 -> 4347, Q4_K_M 2031 -> 4272; 4 x 8 gave 4322 / 4070
 * / 3978, 128 x 64 tiles of 8 x 4 3873 / 3610 / 3386, K steps of 16 3981 / 3821 / 3440. So GPUs take 4 x 4
 * and CPU adapters (llvmpipe, SwiftShader) keep 8 x 8.
 * Integer products ("idot", matmat-q8.wgsl: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) on the H200, pp512 Q4_0 /
 * Q8_0 against 4581 / 4363 for the f32 tiles in the same run: 64 x 64 x 32 with 4 x 4 gave 4890 / 4672,
 * K steps of 64 5747 / 5512, of 128 6375 / 6246, of 256 5853 / 5953, and 32 x 64 tiles of 2 x 4 with K
 * steps of 128 (256 invocations) 6698 / 6620: the GPU default for those formats. On lavapipe they lost
 * (tiny-256 Q4_0 pp256: 1644 t/s f32 tiles, 1246-1504 idot), so CPU adapters keep the f32 tiles. The K
 * formats' idot (K steps of 256) did not win on the H200: Q4_K_M pp512 4473 f32 tiles, 4277 (32 x 64, 2 x 4)
 * and 4382 (64 x 32, 4 x 2) idot; they keep the f32 tiles unless tuned ("idot": 1). */
static const int32_t matmat_defaults[LW_GPU_TUNE_MM_KEYS] = {
    [LW_GPU_TUNE_MM_TM] = 64,  [LW_GPU_TUNE_MM_TN] = 64, [LW_GPU_TUNE_MM_TK] = 32,
    [LW_GPU_TUNE_MM_RM] = 8,   [LW_GPU_TUNE_MM_RN] = 8,  [LW_GPU_TUNE_MM_F16] = 0,
    [LW_GPU_TUNE_MM_IDOT] = 0, [LW_GPU_TUNE_MM_SMX] = 0, [LW_GPU_TUNE_MM_PAD] = 0,
};

/* ---------------------------------------------------------------------------------------------------------
 * Keys
 * ------------------------------------------------------------------------------------------------------- */

/* One tunable key: its name and the values it accepts. */
typedef struct tune_key {
    const char *name; /* as in "matvec.q4_0.<name>"                 */
    int32_t min, max; /* accepted range                             */
    int32_t multiple; /* value must be a multiple of this (1: any)  */
    bool pow2;        /* value must be a power of two               */
} tune_key;

static const tune_key matvec_keys[LW_GPU_TUNE_MV_KEYS] = {
    [LW_GPU_TUNE_MV_WG] = {"wg", 1, 1024, 1, true},
    [LW_GPU_TUNE_MV_ROWS] = {"rows", 1, 16, 1, false},
    [LW_GPU_TUNE_MV_BLOCKS] = {"blocks", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_F16] = {"f16", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_SG] = {"sg", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_STAGE] = {"stage", 0, 8192, 1, false},
    [LW_GPU_TUNE_MV_EXACT] = {"exact", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_IDOT] = {"idot", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_OCT] = {"oct", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_NORM] = {"norm", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_GLU] = {"glu", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_ROPE] = {"rope", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_NWG] = {"nwg", 0, 1024, 1, false},
    [LW_GPU_TUNE_MV_NROWS] = {"nrows", 0, 8, 1, false},
    [LW_GPU_TUNE_MV_NPRE] = {"npre", 0, 1, 1, false},
    [LW_GPU_TUNE_MV_QNWG] = {"qnwg", 0, 1024, 1, false},
    [LW_GPU_TUNE_MV_QNROWS] = {"qnrows", 0, 8, 1, false},
    [LW_GPU_TUNE_MV_NGRID] = {"ngrid", 0, 65535, 1, false},
    [LW_GPU_TUNE_MV_QNGRID] = {"qngrid", 0, 65535, 1, false},
};
static const tune_key matmat_keys[LW_GPU_TUNE_MM_KEYS] = {
    [LW_GPU_TUNE_MM_TM] = {"tm", 1, 256, 1, false},   [LW_GPU_TUNE_MM_TN] = {"tn", 1, 256, 1, false},
    [LW_GPU_TUNE_MM_TK] = {"tk", 8, 256, 8, false},   [LW_GPU_TUNE_MM_RM] = {"rm", 1, 16, 1, false},
    [LW_GPU_TUNE_MM_RN] = {"rn", 1, 16, 1, false},    [LW_GPU_TUNE_MM_F16] = {"f16", 0, 1, 1, false},
    [LW_GPU_TUNE_MM_IDOT] = {"idot", 0, 1, 1, false}, [LW_GPU_TUNE_MM_SMX] = {"smx", 0, 1, 1, false},
    [LW_GPU_TUNE_MM_PAD] = {"pad", 0, 16, 4, false},
};
/* Attention (prefill kernel, kernel-attn.c): its tiles and register blocks; the defaults are the device's
 * (lw__gpu_attn_default: CPU adapters 64 invocations, 16 x 32 unblocked; GPUs 128, 64 x 32 of 4 x 4). */
static const tune_key attn_keys[LW_GPU_TUNE_AT_KEYS] = {
    [LW_GPU_TUNE_AT_PWG] = {"pwg", 1, 1024, 1, true},
    [LW_GPU_TUNE_AT_BQ] = {"bq", 1, 256, 1, false},
    [LW_GPU_TUNE_AT_BK] = {"bk", 4, 256, 4, false},
    [LW_GPU_TUNE_AT_RQ] = {"rq", 1, 16, 1, false},
    [LW_GPU_TUNE_AT_RK] = {"rk", 1, 16, 1, false},
    [LW_GPU_TUNE_AT_ONE] = {"one", 0, 4096, 1, false},
    [LW_GPU_TUNE_AT_ROPE] = {"rope", 0, 1, 1, false},
    [LW_GPU_TUNE_AT_SPLITS] = {"splits", 0, 256, 1, false},
    [LW_GPU_TUNE_AT_MCHUNK] = {"mchunk", 1, 256, 1, false},
    [LW_GPU_TUNE_AT_VB] = {"vb", 0, 64, 1, false},
    [LW_GPU_TUNE_AT_KB] = {"kb", 0, 64, 1, false},
    [LW_GPU_TUNE_AT_WG] = {"wg", 1, 1024, 1, true},
    [LW_GPU_TUNE_AT_CHUNK] = {"chunk", 32, 4096, 1, true},
};

/* A family: its name, keys and where its overrides live in lw__gpu_tune. */
typedef struct tune_family {
    const char *name;     /* "matvec" / "matmat" */
    const tune_key *keys; /* its keys            */
    int n_keys;           /* how many            */
} tune_family;

static const tune_family families[LW_GPU_TUNE_FAMILIES] = {{"matvec", matvec_keys, LW_GPU_TUNE_MV_KEYS},
                                                           {"matmat", matmat_keys, LW_GPU_TUNE_MM_KEYS},
                                                           {"attn", attn_keys, LW_GPU_TUNE_AT_KEYS}};

/* Slot of family fam, format index ti, key k. */
static int32_t *slot(lw__gpu_tune *t, int fam, uint32_t ti, int k) {
    return fam == 0 ? &t->matvec[ti][k] : fam == 1 ? &t->matmat[ti][k] : &t->attn[ti][k];
}
static int32_t get_slot(const lw__gpu_tune *t, int fam, uint32_t ti, int k) {
    return fam == 0 ? t->matvec[ti][k] : fam == 1 ? t->matmat[ti][k] : t->attn[ti][k];
}

/* Case-insensitive equality of a (n bytes) and NUL-terminated b. */
static bool name_eq(const char *a, size_t n, const char *b) {
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (!y) return false;
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return false;
    }
    return b[n] == 0;
}

static int find_family(const char *s, size_t n) {
    for (int i = 0; i < LW_GPU_TUNE_FAMILIES; i++)
        if (name_eq(s, n, families[i].name)) return i;
    return -1;
}
/* Format index of a type name ("q4_0", any case) or "*"; -1 when unknown. */
static int find_format(const char *s, size_t n) {
    if (n == 1 && s[0] == '*') return LW_GPU_TUNE_ANY;
    for (uint32_t id = 0; id < LW_TYPE_COUNT; id++) {
        const lw_type_info *ti = lw_type_get(id);
        if (ti && name_eq(s, n, ti->name)) return (int)id;
    }
    return -1;
}
static int find_key(int fam, const char *s, size_t n) {
    for (int k = 0; k < families[fam].n_keys; k++)
        if (name_eq(s, n, families[fam].keys[k].name)) return k;
    return -1;
}

/* Checks value against key k of family fam and stores it. */
static lw_status set_checked(lw__gpu_tune *t, int fam, int ti, int k, int64_t value, char *err) {
    const tune_key *key = &families[fam].keys[k];
    if (value < key->min || value > key->max || value % key->multiple || (key->pow2 && (value & (value - 1))))
        return lw__errorf(err, LW_ERR_INVALID_ARG, "tune: %s.%s = %lld out of range (%d..%d%s%s)",
                          families[fam].name, key->name, (long long)value, key->min, key->max,
                          key->multiple > 1 ? (key->multiple == 8 ? ", a multiple of 8" : ", a multiple of 4")
                                            : "",
                          key->pow2 ? ", a power of two" : "");
    *slot(t, fam, (uint32_t)ti, k) = (int32_t)value;
    return LW_OK;
}

void lw__gpu_tune_init(lw__gpu_tune *t) {
    for (uint32_t i = 0; i <= LW_TYPE_COUNT; i++) {
        for (int k = 0; k < LW_GPU_TUNE_MV_KEYS; k++) t->matvec[i][k] = LW_GPU_TUNE_UNSET;
        for (int k = 0; k < LW_GPU_TUNE_MM_KEYS; k++) t->matmat[i][k] = LW_GPU_TUNE_UNSET;
        for (int k = 0; k < LW_GPU_TUNE_AT_KEYS; k++) t->attn[i][k] = LW_GPU_TUNE_UNSET;
    }
}

/* Splits "family.format.key" into its three indices; false when a part is unknown. */
static bool parse_key(const char *key, int *fam, int *ti, int *k) {
    const char *d1 = strchr(key, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2) return false;
    *fam = find_family(key, (size_t)(d1 - key));
    if (*fam < 0) return false;
    *ti = find_format(d1 + 1, (size_t)(d2 - d1 - 1));
    *k = find_key(*fam, d2 + 1, strlen(d2 + 1));
    return *ti >= 0 && *k >= 0;
}

lw_status lw__gpu_tune_set(lw__gpu_tune *t, const char *key, int64_t value, char *err) {
    int fam, ti, k;
    if (!key || !parse_key(key, &fam, &ti, &k))
        return lw__errorf(err, LW_ERR_INVALID_ARG,
                          "tune: unknown key '%.64s' (family.format.key, e.g. matvec.q4_0.wg)",
                          key ? key : "");
    return set_checked(t, fam, ti, k, value, err);
}

int32_t lw__gpu_tune_get(const lw__gpu_tune *t, const char *key) {
    int fam, ti, k;
    if (!key || !parse_key(key, &fam, &ti, &k)) return LW_GPU_TUNE_UNSET;
    return get_slot(t, fam, (uint32_t)ti, k);
}

/* ---------------------------------------------------------------------------------------------------------
 * JSON: {"family": {"format": {"key": int|true|false, ...}, ...}, ...}
 * ------------------------------------------------------------------------------------------------------- */

/* Reading position in the JSON text. */
typedef struct json_in {
    const char *s; /* text          */
    size_t n, i;   /* length, cursor */
    char *err;     /* message buffer */
} json_in;

static void ws(json_in *j) {
    while (j->i < j->n &&
           (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}
static bool eat(json_in *j, char c) {
    ws(j);
    if (j->i < j->n && j->s[j->i] == c) {
        j->i++;
        return true;
    }
    return false;
}
static lw_status syntax(json_in *j, const char *what) {
    return lw__errorf(j->err, LW_ERR_INVALID_ARG, "tune JSON: %s at byte %zu", what, j->i);
}
/* A string without escapes (names only): *p, *len point into the text. */
static lw_status str(json_in *j, const char **p, size_t *len) {
    if (!eat(j, '"')) return syntax(j, "expected a string");
    size_t b = j->i;
    while (j->i < j->n && j->s[j->i] != '"') {
        if (j->s[j->i] == '\\' || (unsigned char)j->s[j->i] < 0x20)
            return syntax(j, "unexpected character in a name");
        j->i++;
    }
    if (j->i >= j->n) return syntax(j, "unterminated string");
    *p = j->s + b;
    *len = j->i - b;
    j->i++;
    return LW_OK;
}
/* An integer (optional minus, digits), true (1) or false (0). */
static lw_status integer(json_in *j, int64_t *v) {
    ws(j);
    if (j->n - j->i >= 4 && memcmp(j->s + j->i, "true", 4) == 0) {
        j->i += 4;
        *v = 1;
        return LW_OK;
    }
    if (j->n - j->i >= 5 && memcmp(j->s + j->i, "false", 5) == 0) {
        j->i += 5;
        *v = 0;
        return LW_OK;
    }
    bool neg = j->i < j->n && j->s[j->i] == '-';
    if (neg) j->i++;
    size_t b = j->i;
    int64_t x = 0;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        if (x > 100000000) return syntax(j, "number too large");
        x = x * 10 + (j->s[j->i++] - '0');
    }
    if (j->i == b) return syntax(j, "expected an integer");
    if (j->i < j->n && (j->s[j->i] == '.' || j->s[j->i] == 'e' || j->s[j->i] == 'E'))
        return syntax(j, "expected an integer");
    *v = neg ? -x : x;
    return LW_OK;
}

/* One object of the JSON: depth 0 the families, 1 a family's formats (fam), 2 a format's keys (fam, ti). */
static lw_status object(json_in *j, lw__gpu_tune *t, int depth, int fam, int ti) {
    if (!eat(j, '{')) return syntax(j, "expected '{'");
    if (eat(j, '}')) return LW_OK;
    for (;;) {
        const char *name = NULL;
        size_t len = 0;
        lw_status st = str(j, &name, &len);
        if (st != LW_OK) return st;
        if (!eat(j, ':')) return syntax(j, "expected ':'");
        if (depth == 0) {
            int f = find_family(name, len);
            if (f < 0)
                return lw__errorf(j->err, LW_ERR_INVALID_ARG,
                                  "tune JSON: unknown family '%.*s' (matvec, matmat, attn)",
                                  (int)(len > 32 ? 32 : len), name);
            st = object(j, t, 1, f, 0);
        } else if (depth == 1) {
            int x = find_format(name, len);
            if (x < 0)
                return lw__errorf(j->err, LW_ERR_INVALID_ARG, "tune JSON: unknown format '%.*s'",
                                  (int)(len > 32 ? 32 : len), name);
            st = object(j, t, 2, fam, x);
        } else {
            int k = find_key(fam, name, len);
            if (k < 0)
                return lw__errorf(j->err, LW_ERR_INVALID_ARG, "tune JSON: unknown %s key '%.*s'",
                                  families[fam].name, (int)(len > 32 ? 32 : len), name);
            int64_t v = 0;
            if ((st = integer(j, &v)) == LW_OK) st = set_checked(t, fam, ti, k, v, j->err);
        }
        if (st != LW_OK) return st;
        if (eat(j, '}')) return LW_OK;
        if (!eat(j, ',')) return syntax(j, "expected ',' or '}'");
    }
}

lw_status lw__gpu_tune_json(lw__gpu_tune *t, const char *json, size_t len, char *err) {
    if (!json) return lw__errorf(err, LW_ERR_INVALID_ARG, "tune JSON: no text");
    lw__gpu_tune copy = *t; /* all or nothing */
    json_in j = {json, len, 0, err};
    lw_status st = object(&j, &copy, 0, 0, 0);
    if (st != LW_OK) return st;
    ws(&j);
    if (j.i != j.n) return syntax(&j, "trailing text");
    *t = copy;
    return LW_OK;
}

/* Appends to dst[*n..cap); false once it does not fit. */
static bool put(char *dst, size_t cap, size_t *n, const char *s) {
    size_t l = strlen(s);
    if (*n + l + 1 > cap) return false;
    memcpy(dst + *n, s, l + 1);
    *n += l;
    return true;
}

/* Whether any key of family fam is set for format index ti. */
static bool any_set(const lw__gpu_tune *t, int fam, uint32_t ti) {
    for (int k = 0; k < families[fam].n_keys; k++)
        if (get_slot(t, fam, ti, k) != LW_GPU_TUNE_UNSET) return true;
    return false;
}

int lw__gpu_tune_to_json(const lw__gpu_tune *t, char *dst, size_t cap) {
    size_t n = 0;
    bool ok = put(dst, cap, &n, "{");
    const char *fam_sep = "";
    for (int fam = 0; fam < LW_GPU_TUNE_FAMILIES; fam++) {
        const char *fmt_sep = "";
        for (uint32_t ti = 0; ti <= LW_TYPE_COUNT; ti++) {
            if (!any_set(t, fam, ti)) continue;
            char buf[96];
            if (!*fmt_sep) { /* the family's first format opens the family */
                snprintf(buf, sizeof buf, "%s\"%s\":{", fam_sep, families[fam].name);
                ok = ok && put(dst, cap, &n, buf);
                fam_sep = ",";
            }
            const lw_type_info *info = ti < LW_TYPE_COUNT ? lw_type_get(ti) : NULL;
            snprintf(buf, sizeof buf, "%s\"%s\":{", fmt_sep, info ? info->name : "*");
            ok = ok && put(dst, cap, &n, buf);
            fmt_sep = ",";
            const char *key_sep = "";
            for (int k = 0; k < families[fam].n_keys; k++) {
                int32_t v = get_slot(t, fam, ti, k);
                if (v == LW_GPU_TUNE_UNSET) continue;
                snprintf(buf, sizeof buf, "%s\"%s\":%d", key_sep, families[fam].keys[k].name, (int)v);
                ok = ok && put(dst, cap, &n, buf);
                key_sep = ",";
            }
            ok = ok && put(dst, cap, &n, "}");
        }
        if (*fmt_sep) ok = ok && put(dst, cap, &n, "}");
    }
    ok = ok && put(dst, cap, &n, "}");
    return ok && n <= INT32_MAX ? (int)n : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Variants for a device
 * ------------------------------------------------------------------------------------------------------- */

/* Value of key k of family fam for type: the format's override, else "*", else the default. */
static int32_t pick(const lw__gpu_tune *t, int fam, uint32_t type, int k, int32_t def) {
    if (!t) return def;
    if (type < LW_TYPE_COUNT && get_slot(t, fam, type, k) != LW_GPU_TUNE_UNSET)
        return get_slot(t, fam, type, k);
    if (get_slot(t, fam, LW_GPU_TUNE_ANY, k) != LW_GPU_TUNE_UNSET)
        return get_slot(t, fam, LW_GPU_TUNE_ANY, k);
    return def;
}

/* Whether s contains w, ignoring ASCII case. */
static bool has_word(const char *s, const char *w) {
    for (; *s; s++) {
        size_t k = 0;
        while (w[k] && s[k] && (s[k] | 32) == (w[k] | 32)) k++;
        if (!w[k]) return true;
    }
    return false;
}

bool lw__gpu_cpu_adapter(const lw_gpu_info *i) {
    const char *names[4] = {i->vendor, i->architecture, i->device, i->description};
    for (int k = 0; k < 4; k++)
        if (has_word(names[k], "llvmpipe") || has_word(names[k], "swiftshader")) return true;
    return false;
}

/* Fits a mat-vec variant to the device: fewer invocations, then fewer rows, until the limits hold. */
static void mv_fit(lw__gpu_matvec_variant *r, const lw_gpu_info *info) {
    while (r->wg_size > 1 && (r->wg_size > info->max_compute_invocations_per_workgroup ||
                              r->wg_size > info->max_compute_workgroup_size_x))
        r->wg_size /= 2;
    while (r->rows > 1 && (uint64_t)r->wg_size * r->rows * 4 > info->max_compute_workgroup_storage_size)
        r->rows /= 2;
}

lw__gpu_matvec_variant lw__gpu_matvec_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type) {
    int32_t v[LW_GPU_TUNE_MV_KEYS], def[LW_GPU_TUNE_MV_KEYS];
    memcpy(def, matvec_defaults, sizeof def);
    if (lw__gpu_cpu_adapter(info)) {
        def[LW_GPU_TUNE_MV_WG] = 64; /* lavapipe's measurement (above) */
    } else if (type == LW_TYPE_Q8_0) {
        /* H200, llama-3.2-1b shape (K 2048 / 8192) tg128: 256 x 8 270 t/s, 128 x 4 251 */
        def[LW_GPU_TUNE_MV_WG] = 256;
        def[LW_GPU_TUNE_MV_ROWS] = 8;
    } else if (type == LW_TYPE_Q4_K || type == LW_TYPE_Q6_K) {
        /* same (Q4_K_M: Q4_K and Q6_K): 2 rows 113 t/s, 4 rows 101, 1 row 90, 8 rows 78 */
        def[LW_GPU_TUNE_MV_ROWS] = 2;
    }
    /* the CPU's bits where the format has the kernel (with float sums, greedy agreement over 1000 tokens of
     * tiny-256 was TQ1_0 98.4 %, TQ2_0 98.1, IQ1_M 98.3, Q2_K 99.3). It re-rounds x per workgroup and chains
     * floats per row: on lavapipe 1024 x 2048 Q4_K 4.3 -> 21.6 ms, Q6_K 9.2 -> 26.8, TQ1_0 2.4 -> 16.5.
     * (CPU adapters only; below) */
    /* GPUs take the float (or integer) kernels for every format: the exact order is a CPU adapter's test
     * property (it also makes prompts of up to GM_EXACT_TOKENS tokens run one mat-vec per token) */
    def[LW_GPU_TUNE_MV_EXACT] = lw__gpu_cpu_adapter(info);
    /* integer products on GPUs: x rounded once per step by its own pass, dot4I8Packed over the weights' codes
     * (the float kernel re-rounds x in every workgroup and dequantizes 8 weights per f32 dot). CPU adapters
     * keep the float kernels, which the agreement tests pin */
    def[LW_GPU_TUNE_MV_IDOT] = !lw__gpu_cpu_adapter(info) && info->has_dot4 && lw__gpu_matmat_has_idot(type);
    if (def[LW_GPU_TUNE_MV_IDOT]) {
        /* H200, 8192 x 8192, subgroups (tests/web/bench-matvec.mjs idot configs), GB/s: Q4_0 wg32 r2 1847,
         * wg128 r2 1836, wg128 r4 1821, wg256 r4 1730; Q8_0 wg64 r1 1047, wg256 r4 1049, wg128 r4 1036; Q4_K
         * wg32 r2 621, wg128 r2 617, wg128 r4 509; Q6_K wg128 r1 1196, wg128 r2 1186, wg128 r4 1075. Q4_0 /
         * Q8_0 in block pairs (the runner's choice for rows of an even number of blocks), 8192 x 8192 / 4096
         * x 14336: Q4_0 wg128 r4 2090 / 1881, r2 1596 / 1751; Q8_0 wg128 r4 714 / 2379, r2 704 / 2150 */
        def[LW_GPU_TUNE_MV_WG] = 128;
        def[LW_GPU_TUNE_MV_ROWS] = type == LW_TYPE_Q6_K                           ? 1
                                   : type == LW_TYPE_Q4_0 || type == LW_TYPE_Q8_0 ? 4
                                                                                  : 2;
    }
    for (int k = 0; k < LW_GPU_TUNE_MV_KEYS; k++) v[k] = pick(t, 0, type, k, def[k]);
    lw__gpu_matvec_variant r;
    memset(&r, 0, sizeof r); /* by field name: fields this file does not tune (added later) start at 0 */
    r.type = type;
    r.f16 = v[LW_GPU_TUNE_MV_F16] && info->has_f16;
    r.subgroups = v[LW_GPU_TUNE_MV_SG] && info->has_subgroups;
    r.wg_size = (uint32_t)v[LW_GPU_TUNE_MV_WG];
    r.rows = (uint32_t)v[LW_GPU_TUNE_MV_ROWS];
    r.blocks = v[LW_GPU_TUNE_MV_BLOCKS] != 0;
    r.stage = (uint32_t)v[LW_GPU_TUNE_MV_STAGE];
    r.exact = v[LW_GPU_TUNE_MV_EXACT] && lw__gpu_matvec_has_exact(type, true); /* the plan checks the order */
    r.idot = v[LW_GPU_TUNE_MV_IDOT] && !r.exact && info->has_dot4 && lw__gpu_matmat_has_idot(type);
    r.oct = r.idot && v[LW_GPU_TUNE_MV_OCT] && (type == LW_TYPE_Q4_0 || type == LW_TYPE_Q8_0); /* pair's */
    if (r.idot) { /* integer products always take x rounded as the CPU rounds it for the format */
        const lw__gpu_format *f = lw__gpu_format_of(type);
        r.actq = f ? f->actq : LW_GPU_ACTQ_NONE;
    }
    mv_fit(&r, info);
    return r;
}

bool lw__gpu_matvec_norm_tuned(const lw__gpu_tune *t, uint32_t type) {
    /* Q4_K / Q5_K too (their 64-element groups in the loop; H200 STEPS=models tg128 alternating, REPS=3,
     * norm 0 / 1 for q4_K: llama-3.1-8b Q4_K_M 230.4 / 238.0 and 229.5 / 233.1 t/s, 389 / 325 dispatches;
     * llama-3.2-1b Q4_K_M 730.6 / 777.5 and 691.5 / 677.6, 197 / 165. A first loop of one 32-element
     * sub-block per lane, each loading the group's quant words again, took the 8B to 226 vs 240.) */
    return pick(t, 0, type, LW_GPU_TUNE_MV_NORM, matvec_defaults[LW_GPU_TUNE_MV_NORM]) != 0;
}

void lw__gpu_matvec_norm_tune(const lw__gpu_tune *t, uint32_t type, bool qkv,
                              lw__gpu_matvec_norm_variant *v) {
    v->prefetch = pick(t, 0, type, LW_GPU_TUNE_MV_NPRE, v->prefetch ? 1 : 0) != 0;
    int32_t wg = pick(t, 0, type, LW_GPU_TUNE_MV_NWG, 0), rows = pick(t, 0, type, LW_GPU_TUNE_MV_NROWS, 0);
    const int32_t grid = pick(t, 0, type, qkv ? LW_GPU_TUNE_MV_QNGRID : LW_GPU_TUNE_MV_NGRID, -1);
    if (grid >= 0) v->tiles = (uint32_t)grid;
    if (v->tiles) v->prefetch = false; /* (the first tile's loads only) */
    if (v->glu) { /* 64 rows a workgroup whatever its size: "nwg" picks the size, the rows follow */
        if (wg >= 256 && wg <= 1024) v->wg_size = (uint32_t)wg, v->rows = 2048u / (uint32_t)wg;
        return;
    }
    if (qkv) { /* the Q|K|V projection's own shape: a 14 MB mat-vec on the 8B, far from gate|up's 66 MB */
        const int32_t qwg = pick(t, 0, type, LW_GPU_TUNE_MV_QNWG, 0),
                      qrows = pick(t, 0, type, LW_GPU_TUNE_MV_QNROWS, 0);
        if (qwg > 0) wg = qwg;
        if (qrows > 0) rows = qrows;
    }
    if (wg > 0) v->wg_size = (uint32_t)wg;
    if (rows > 0) v->rows = (uint32_t)rows;
}

bool lw__gpu_matvec_rope_tuned(const lw__gpu_tune *t, uint32_t type) {
    return pick(t, 0, type, LW_GPU_TUNE_MV_ROPE, matvec_defaults[LW_GPU_TUNE_MV_ROPE]) != 0;
}

bool lw__gpu_matvec_glu_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type, uint64_t k) {
    /* by default for rows of up to 2048 (H200, STEPS=models, tg128 alternating in one run, norm 0 / glu 0 /
     * glu 1: llama-3.2-1b Q4_0 595 / 723 / 993 and 801 / 897 / 998 t/s; llama-3.1-8b Q4_0, rows of 4096, 297
     * / 316 / 276 and 306 / 316 / 282 with 256 x 8: its 448 workgroups of 64 rows, four 8-element chunks of x
     * per invocation held through the prologue, run in more waves than the separate quantizer costs), and
     * for longer rows where the device takes 512 x 4 (two chunks: lw__gpu_matvec_norm_default) */
    const int32_t v = pick(t, 0, type, LW_GPU_TUNE_MV_GLU, -1);
    /* Q4_K / Q5_K gate|up: opt-in ("glu": 1). Its blocks of 32 are not the CPU's Q8_K rounding of the down
     * projection's input: lavapipe, tiny-256 random models, 24 greedy tokens, model.test.mjs: 95.8 % (q4_k),
     * 91.7 % (q5_k) agreement with the CPU engine, logits within 1.5 % of their range, against 100 % and
     * 0.0 / 0.84 % with the quantizer's Q8_K; what it saves on a GPU (one dispatch per block) is not measured
     */
    if (v < 0 && (type == LW_TYPE_Q4_K || type == LW_TYPE_Q5_K)) return false;
    return v < 0 ? k <= 2048 || lw__gpu_matvec_norm_glu_wide(info) : v != 0;
}

void lw__gpu_matvec_shape(const lw__gpu_tune *t, const lw_gpu_info *info, lw__gpu_matvec_variant *v,
                          uint64_t k) {
    const bool kq = v->idot && (v->type == LW_TYPE_Q4_K || v->type == LW_TYPE_Q6_K);
    if ((!v->pair && !kq) || lw__gpu_cpu_adapter(info) || pick(t, 0, v->type, LW_GPU_TUNE_MV_WG, -1) != -1 ||
        pick(t, 0, v->type, LW_GPU_TUNE_MV_ROWS, -1) != -1)
        return;
    if (v->oct) {
        /* (opt-in: slower than pairs on the H200, matvec-q8.wgsl) one invocation per eight-block step of a
         * row where the row has few (K 2048: 8, 4096: 16), at most 32 (a subgroup there) for longer rows */
        const uint64_t steps = k / 256;
        v->wg_size = 4;
        while (v->wg_size < 32 && (uint64_t)v->wg_size * 2 <= steps) v->wg_size *= 2;
        v->rows = v->type == LW_TYPE_Q4_0 ? 4 : 2;
    } else if (kq) {
        /* H200, tests/web/bench-matvec.mjs ROWS K, idot configs, us per mat-vec (default wg128 r2 / r1): Q4_K
         * wg32 r2 16384x2048 14.9 / 17.6, 6144x4096 11.9 / 12.4, 28672x4096 31.8 / 35.5 (3072x2048 8.5,
         * 2048x2048 8.9 / 8.2: the same within noise), longer rows wg256 r2 (4096x14336 40.3 / 42.2,
         * 2048x8192 11.1 / 11.3); Q6_K wg128 r2 up to 4096 (16384x2048 30.6 / 33.1, 6144x4096 27.3 / 34.4,
         * 28672x4096 69.9 / 74.7), r1 beyond (4096x14336 44.5, r2 46.6) */
        if (v->type == LW_TYPE_Q4_K) {
            v->wg_size = k <= 4096 ? 32 : 256;
            v->rows = 2;
        } else if (k <= 4096) {
            v->wg_size = 128;
            v->rows = 2;
        }
    } else if (v->type == LW_TYPE_Q4_0) {
        /* two subgroups of 4 rows a workgroup whatever the rows' length: in a whole decode step the isolated
         * timings below (wg32 r4 up to 4096, wg256 r4 beyond) did not hold (H100, 2026-12-08, STEPS=models,
         * llama-3.1-8b Q4_0 `bench -p 512 -n 64 -r 2`, two rounds alternating: wg64 r4 for the O and down
         * projections 331.6 / 333.2 t/s against 314.7 / 313.7 with wg32 / wg256) */
        v->wg_size = 64;
        v->rows = 4;
    } else if (k <= 4096) {
        /* H200, the shapes of llama-3.2-1b and llama-3.1-8b (tests/web/bench-matvec.mjs ROWS K, pair configs,
         * us per mat-vec): with at most 64 block pairs a row (K <= 4096) one subgroup per workgroup, where
         * 128 invocations left half or three quarters idle: Q4_0 wg32 r4 / wg128 r4 3072x2048 12.1 / 12.0,
         * 2048x2048 8.3 / 9.3, 16384x2048 15.3 / 18.3, 6144x4096 14.3 / 15.1, 28672x4096 29.8 / 35.6; Q8_0
         * wg32 r2 / wg128 r4 12.8 / 13.0, 9.2 / 9.8, 19.6 / 24.0, 16.8 / 19.1, 43.8 / 47.2. Longer rows: Q4_0
         * wg256 r4 (4096x14336 16.8 against 18.0 at wg128), Q8_0 keeps wg128 r4 (31.7; wg256 33.7) */
        v->wg_size = 32;
        v->rows = 2;
    }
    mv_fit(v, info);
}

lw__gpu_matmat_variant lw__gpu_matmat_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t type) {
    int32_t v[LW_GPU_TUNE_MM_KEYS], def[LW_GPU_TUNE_MM_KEYS];
    memcpy(def, matmat_defaults, sizeof def);
    const bool gpu = !lw__gpu_cpu_adapter(info);
    if (gpu) def[LW_GPU_TUNE_MM_RM] = def[LW_GPU_TUNE_MM_RN] = 4; /* the H200's (above) */
    /* integer products first: their tiles have defaults of their own (above) */
    const lw__gpu_format *f = lw__gpu_format_of(type);
    def[LW_GPU_TUNE_MM_IDOT] = gpu && lw__gpu_matmat_has_idot(type) && info->has_dot4 && f && f->block == 32;
    /* the matrix units, where the device has them, for every quantized format (matmat-smx.wgsl: 16-bit
     * digits, three i8 products per fragment and K step; off with "smx": 0): 128 x 128 tiles of 8 subgroups,
     * each 4 x 2 fragments, K steps of 32. On the H200 (tests/web/bench-matmat.mjs 4096 4096 512, the prep
     * pass included): Q4_0 0.47 ms (36 TFLOP/s), Q4_K 0.53 ms; 64 x 128 x 32 of 2 x 2 0.65 / 0.70 ms, the f32
     * tiles 0.91 ms; whole models (web/cli.mjs bench --batch 512): pp512 of the 1B Q4_0 7701 -> 13166 t/s and
     * of the 8B Q4_0 1202 -> 2568 against the integer products */
    def[LW_GPU_TUNE_MM_SMX] = 1;
    const bool smx = pick(t, 1, type, LW_GPU_TUNE_MM_SMX, def[LW_GPU_TUNE_MM_SMX]) &&
                     lw__gpu_smx_available(info) && lw__gpu_matmat_has_smx(type);
    if (smx) {
        def[LW_GPU_TUNE_MM_TM] = 128, def[LW_GPU_TUNE_MM_TN] = 128, def[LW_GPU_TUNE_MM_TK] = 32;
        def[LW_GPU_TUNE_MM_RM] = 4, def[LW_GPU_TUNE_MM_RN] = 2;
    } else if (pick(t, 1, type, LW_GPU_TUNE_MM_IDOT, def[LW_GPU_TUNE_MM_IDOT])) {
        def[LW_GPU_TUNE_MM_TM] = 32, def[LW_GPU_TUNE_MM_TN] = 64, def[LW_GPU_TUNE_MM_TK] = 128;
        def[LW_GPU_TUNE_MM_RM] = 2, def[LW_GPU_TUNE_MM_RN] = 4;
        if (f && f->block > 128) def[LW_GPU_TUNE_MM_TK] = (int32_t)f->block; /* K steps of whole blocks */
    }
    for (int k = 0; k < LW_GPU_TUNE_MM_KEYS; k++) v[k] = pick(t, 1, type, k, def[k]);
    lw__gpu_matmat_variant r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.f16 = v[LW_GPU_TUNE_MM_F16] && info->has_f16;
    /* integer products where the format and the device have them; they round X (actq) and take f32 */
    r.idot = v[LW_GPU_TUNE_MM_IDOT] && lw__gpu_matmat_has_idot(type) && info->has_dot4;
    r.smx = smx;
    if (r.smx) { /* X is the prep pass's digits; tiles as given (lw__gpu_matmat_check says what breaks) */
        r.idot = false;
        r.actq = LW_GPU_ACTQ_NONE;
        r.tm = (uint32_t)v[LW_GPU_TUNE_MM_TM], r.tn = (uint32_t)v[LW_GPU_TUNE_MM_TN];
        r.tk = (uint32_t)v[LW_GPU_TUNE_MM_TK];
        r.rm = (uint32_t)v[LW_GPU_TUNE_MM_RM], r.rn = (uint32_t)v[LW_GPU_TUNE_MM_RN];
        r.pad = (uint32_t)v[LW_GPU_TUNE_MM_PAD];
        /* fit the device's workgroup memory: the digit tiles are most of it */
        while (r.tk > 32 && r.tk % 64 == 0 &&
               lw__gpu_matmat_wg_bytes(&r) > info->max_compute_workgroup_storage_size)
            r.tk /= 2;
        return r;
    }
    if (r.idot) {
        r.f16 = false;
        lw__gpu_matmat_round_acts(&r);
    }
    r.tm = (uint32_t)v[LW_GPU_TUNE_MM_TM];
    r.tn = (uint32_t)v[LW_GPU_TUNE_MM_TN];
    r.tk = (uint32_t)v[LW_GPU_TUNE_MM_TK];
    r.rm = (uint32_t)v[LW_GPU_TUNE_MM_RM];
    r.rn = (uint32_t)v[LW_GPU_TUNE_MM_RN];
    /* fit the device: halve the larger tile (keeping it a multiple of its register block), then K, until the
     * invocations and workgroup memory fit; a combination that breaks the template's own rules is left for
     * lw__gpu_matmat_check to report */
    for (int guard = 0; guard < 32; guard++) {
        uint32_t wg = lw__gpu_matmat_wg_size(&r);
        bool fits = wg <= info->max_compute_invocations_per_workgroup &&
                    wg <= info->max_compute_workgroup_size_x &&
                    lw__gpu_matmat_wg_bytes(&r) <= info->max_compute_workgroup_storage_size;
        if (fits || !r.rm || !r.rn) break;
        bool n_ok = r.tn % 2 == 0 && (r.tn / 2) % r.rn == 0, m_ok = r.tm % 2 == 0 && (r.tm / 2) % r.rm == 0;
        if (n_ok && (r.tn >= r.tm || !m_ok))
            r.tn /= 2;
        else if (m_ok)
            r.tm /= 2;
        else if (r.tk >= (r.idot ? 64u : 16u) && r.tk % (r.idot ? 64u : 16u) == 0 &&
                 wg <= info->max_compute_invocations_per_workgroup) /* idot: whole 32-blocks */
            r.tk /= 2;
        else
            break;
    }
    return r;
}

lw__gpu_attn_variant lw__gpu_attn_tuned(const lw__gpu_tune *t, const lw_gpu_info *info, uint32_t kv_type,
                                        uint32_t head_dim, uint32_t group) {
    lw__gpu_attn_variant v = lw__gpu_attn_default(info, kv_type, head_dim, group);
    /* as given: lw__gpu_attn_pipeline says what does not suit the device */
    v.pwg = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_PWG, (int32_t)v.pwg);
    v.bq = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_BQ, (int32_t)v.bq);
    v.bk = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_BK, (int32_t)v.bk);
    v.rq = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_RQ, (int32_t)v.rq);
    v.rk = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_RK, (int32_t)v.rk);
    v.wg_size = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_WG, (int32_t)v.wg_size);
    v.chunk = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_CHUNK, (int32_t)v.chunk);
    v.one_max = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_ONE, (int32_t)v.one_max);
    v.splits = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_SPLITS, (int32_t)v.splits);
    v.min_chunk = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_MCHUNK, (int32_t)v.min_chunk);
    if (v.min_chunk > v.chunk) v.min_chunk = v.chunk;
    v.vb = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_VB, (int32_t)v.vb);
    v.kb = (uint32_t)pick(t, 2, kv_type, LW_GPU_TUNE_AT_KB, (int32_t)v.kb);
    return v;
}

bool lw__gpu_attn_rope_tuned(const lw__gpu_tune *t, uint32_t kv_type) {
    /* off by default: on the H200 the fold costs more than the dispatch it saves (STEPS=models, llama-3.2-1b
     * Q4_0 tg128 after 512 tokens 1020 -> 831 t/s, llama-3.1-8b Q4_0 317 -> 254; profile: the decode kernel
     * 12.2 -> 26.0 us with RoPE in its prologue, rope_qkv's own dispatch 9.8 us) */
    return pick(t, 2, kv_type, LW_GPU_TUNE_AT_ROPE, 0) != 0;
}
