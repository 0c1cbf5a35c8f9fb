/* The prompt-attack classifier's lexical logit in C: the same hashed character and shape
 * n-gram features as `attack_classifier.reference_lexical_features`, dotted with the
 * weights, in one call.
 *
 * Why: on a short prompt the numpy path spends ~20 us, nearly all of it numpy's per-call
 * overhead, and every text request pays it inline. Here it is a few microseconds.
 *
 * The feature ids are the reference's exactly (integer arithmetic mod 2^64); the values'
 * norms and the dot product are summed in double where numpy sums float32, so the logit
 * agrees with the numpy path to ~1e-6, not bit for bit (tests/models/test_lexical_kernel.py
 * and bench/check_lexical_features.py hold it to that). Optional: when this module is not
 * built, `attack_classifier` uses the numpy path.
 *
 * The caller (`attack_classifier.lexical_logit`) has already NFKC-normalised, collapsed the
 * whitespace and cut the texts to their head and tail (`_bounded_pair`); this file only
 * hashes, counts and sums.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HASH_M 0x9E3779B97F4A7C15ULL
#define HASH_SALT 0xBF58476D1CE4E5B9ULL
#define HASH_F 0x94D049BB133111EBULL
#define SHAPE_SALT_BASE 16
#define EMPTY_SLOT 0xFFFFFFFFu /* never an id: ids are below 2^24 + 2^24 */
#define STACK_SLOTS 4096       /* tables up to this size live on the stack */

typedef struct {
    uint32_t *ids;
    uint32_t *counts;
    uint32_t *used; /* the occupied slots, in insertion order: the sums visit only these */
    size_t n_used;
    size_t mask;
} Counter;

/* Open addressing, linear probing; the table has at least twice as many slots as ids. */
static inline void counter_add(Counter *c, uint32_t id) {
    size_t slot = ((uint64_t)id * 0x9E3779B1u) & c->mask;
    while (c->ids[slot] != EMPTY_SLOT && c->ids[slot] != id) {
        slot = (slot + 1) & c->mask;
    }
    if (c->ids[slot] == EMPTY_SLOT) {
        c->ids[slot] = id;
        c->counts[slot] = 0;
        c->used[c->n_used++] = (uint32_t)slot;
    }
    c->counts[slot] += 1;
}

static inline uint32_t bucket_of(uint64_t polynomial, int n, int salt_base, int bits) {
    uint64_t x = polynomial + (uint64_t)(salt_base + n) * HASH_SALT;
    x ^= x >> 32;
    x *= HASH_F;
    return (uint32_t)(x >> (64 - bits));
}

/* Every n-gram (n = n_min..n_max) of codes[0..length) into the counter, ids offset by `offset`.
 * codes already carry the reference's "+ 1". */
static void count_ngrams(Counter *counter, const uint64_t *codes, Py_ssize_t length, int n_min, int n_max,
                         int salt_base, int bits, uint32_t offset) {
    for (Py_ssize_t i = 0; i < length; i++) {
        uint64_t h = 0;
        for (int n = 1; n <= n_max && i + n <= length; n++) {
            h = h * HASH_M + codes[i + n - 1];
            if (n >= n_min) {
                counter_add(counter, offset + bucket_of(h, n, salt_base, bits));
            }
        }
    }
}

/* Per block (0: character ids below `buckets`, 1: shape ids), in one pass over the counted ids:
 * sum_id w[id] * v(id) and sum_id v(id)^2, v = sublinear[count]. */
static void block_sums(const Counter *c, uint32_t buckets, const float *weights, const float *sublinear,
                       Py_ssize_t n_sublinear, double dot[2], double square[2]) {
    double char_dot = 0.0, char_square = 0.0, shape_dot = 0.0, shape_square = 0.0;
    for (size_t k = 0; k < c->n_used; k++) {
        size_t slot = c->used[k];
        uint32_t id = c->ids[slot];
        Py_ssize_t count = c->counts[slot];
        double v = count < n_sublinear ? (double)sublinear[count] : 1.0 + log((double)count);
        if (id < buckets) {
            char_dot += (double)weights[id] * v;
            char_square += v * v;
        } else {
            shape_dot += (double)weights[id] * v;
            shape_square += v * v;
        }
    }
    dot[0] = char_dot, dot[1] = shape_dot, square[0] = char_square, square[1] = shape_square;
}

static int is_float32(const Py_buffer *b) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    return f[0] == 'f' && f[1] == '\0' && b->itemsize == 4;
}

static uint64_t shape_of(Py_UCS4 ch) {
    if (ch >= 128) return 'u';
    if (ch >= 'a' && ch <= 'z') return 'a';
    if (ch >= 'A' && ch <= 'Z') return 'A';
    if (ch >= '0' && ch <= '9') return '0';
    return ch;
}

static uint64_t lower_ascii(Py_UCS4 ch) { return (ch >= 'A' && ch <= 'Z') ? ch + 32 : ch; }

/* lexical_logit(lowered, cased, weights, sublinear, bias, bits, ngram_min, ngram_max,
 *               shape_bits, shape_ngram_min, shape_ngram_max, shape_weight) -> float
 *
 * lowered: the lower-cased bounded text, or None when `cased` is ASCII (then lowered here).
 * weights: float32 buffer of 2^bits + 2^shape_bits; sublinear: float32 1 + ln(count) by count. */
static PyObject *lexical_logit(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "lexical_logit takes 12 arguments");
        return NULL;
    }
    PyObject *lowered = args[0], *cased = args[1];
    if (!PyUnicode_Check(cased) || (lowered != Py_None && !PyUnicode_Check(lowered))) {
        PyErr_SetString(PyExc_TypeError, "lexical_logit: texts must be str (lowered may be None)");
        return NULL;
    }
    double bias = PyFloat_AsDouble(args[4]);
    long bits = PyLong_AsLong(args[5]), n_min = PyLong_AsLong(args[6]), n_max = PyLong_AsLong(args[7]);
    long shape_bits = PyLong_AsLong(args[8]), s_min = PyLong_AsLong(args[9]), s_max = PyLong_AsLong(args[10]);
    double shape_weight = PyFloat_AsDouble(args[11]);
    if (PyErr_Occurred()) return NULL;
    if (bits < 8 || bits > 24 || n_min < 1 || n_max < n_min || n_max > 8 ||
        (shape_bits != 0 && (shape_bits < 8 || shape_bits > 24)) || s_min < 1 || s_max < s_min || s_max > 8) {
        PyErr_SetString(PyExc_ValueError, "lexical_logit: feature config out of range");
        return NULL;
    }
    uint32_t buckets = (uint32_t)1 << bits;
    uint32_t shape_buckets = shape_bits ? (uint32_t)1 << shape_bits : 0;

    Py_buffer wbuf, sbuf;
    if (PyObject_GetBuffer(args[2], &wbuf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[3], &sbuf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&wbuf);
        return NULL;
    }
    PyObject *result = NULL;
    uint64_t *codes = NULL;
    uint32_t *table = NULL;
    uint32_t stack_table[3 * STACK_SLOTS];
    if (!is_float32(&wbuf) || !is_float32(&sbuf)) {
        PyErr_SetString(PyExc_TypeError, "lexical_logit: weights and sublinear must be float32 buffers");
        goto done;
    }
    if (wbuf.len != (Py_ssize_t)((size_t)(buckets + shape_buckets) * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "lexical_logit: weights do not match the feature config");
        goto done;
    }
    const float *weights = (const float *)wbuf.buf;
    const float *sublinear = (const float *)sbuf.buf;
    Py_ssize_t n_sublinear = sbuf.len / (Py_ssize_t)sizeof(float);

    PyObject *lower_text = lowered == Py_None ? cased : lowered;
    Py_ssize_t n_lower = PyUnicode_GET_LENGTH(lower_text), n_cased = PyUnicode_GET_LENGTH(cased);
    codes = PyMem_Malloc((size_t)(n_lower + n_cased + 1) * sizeof(uint64_t));
    if (codes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        int kind = PyUnicode_KIND(lower_text);
        const void *data = PyUnicode_DATA(lower_text);
        for (Py_ssize_t i = 0; i < n_lower; i++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, i);
            codes[i] = (lowered == Py_None ? lower_ascii(ch) : ch) + 1;
        }
        kind = PyUnicode_KIND(cased);
        data = PyUnicode_DATA(cased);
        for (Py_ssize_t i = 0; i < n_cased; i++) {
            codes[n_lower + i] = shape_of(PyUnicode_READ(kind, data, i)) + 1;
        }
    }
    /* At most n_max n-grams start at each character of each text: twice that many slots. */
    size_t most = (size_t)n_lower * (size_t)n_max + (shape_bits ? (size_t)n_cased * (size_t)s_max : 0);
    size_t slots = 16;
    while (slots < 2 * most) slots <<= 1;
    if (slots <= STACK_SLOTS) {
        table = stack_table;
    } else {
        table = PyMem_Malloc(3 * slots * sizeof(uint32_t));
        if (table == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    memset(table, 0xFF, slots * sizeof(uint32_t));
    Counter counter = {table, table + slots, table + 2 * slots, 0, slots - 1};
    count_ngrams(&counter, codes, n_lower, (int)n_min, (int)n_max, 0, (int)bits, 0);
    if (shape_bits) {
        count_ngrams(&counter, codes + n_lower, n_cased, (int)s_min, (int)s_max, SHAPE_SALT_BASE, (int)shape_bits,
                     buckets);
    }
    double dot[2], square[2];
    block_sums(&counter, buckets, weights, sublinear, n_sublinear, dot, square);
    double logit = bias;
    if (square[0] > 0.0) logit += dot[0] / sqrt(square[0]);
    if (square[1] > 0.0) logit += dot[1] * shape_weight / sqrt(square[1]);
    result = PyFloat_FromDouble(logit);

done:
    if (table != NULL && table != stack_table) PyMem_Free(table);
    PyMem_Free(codes);
    PyBuffer_Release(&sbuf);
    PyBuffer_Release(&wbuf);
    return result;
}

static PyMethodDef methods[] = {
    {"lexical_logit", (PyCFunction)(void (*)(void))lexical_logit, METH_FASTCALL,
     "The lexical stage's logit of one bounded text pair (see the module's C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_lexical_kernel", "The prompt-attack classifier's lexical logit in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lexical_kernel(void) { return PyModule_Create(&module_def); }
