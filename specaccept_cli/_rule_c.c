/*
 * specaccept_cli._rule_c: the accept rule and its token tallies over a whole batch, in one pass, or a refusal.
 *
 * evaluate(offsets, p, q, r) takes a batch as the vectorized rule does (`rule.vectorized`): int64 run
 * offsets (Arrow style, offsets[0] == 0) and float64 token buffers, and returns
 *     (accepted, passing, threshold_sum, examined_tokens, examined_sum, variance_sum, r_bins, t_bins)
 * accepted: a bytearray of int64, each run's accepted-prefix length;
 * passing: tokens with r <= t, t = min(1, p/q), after a rejection too;
 * threshold_sum, examined_sum: sums of rint(t 2^32) over every token and over the examined ones (the
 * accepted prefix and the first rejected token);
 * examined_tokens, and variance_sum: the sum of rint(t (1 - t) 2^32) over the examined tokens;
 * r_bins: a bytearray of int64[R_BINS], tokens by min(floor(r R_BINS), R_BINS - 1), every token;
 * t_bins: a bytearray of int64[2 T_BINS], examined tokens by min(floor(t T_BINS), T_BINS - 1), then
 * those of them kept (r <= t).
 * Every figure is what the numpy path computes (`accept_prefix_batch`, `sampler_tallies`), bit for
 * bit: the same IEEE operations in the same order (one division, the clamp, `<=`, products by powers
 * of two, rint with ties to even, truncation to int64), summed exactly in int64 (property-tested).
 * It returns None ("decline") when a threshold or an r is not in [0, 1] (the numpy path then decides,
 * as it does for unchecked batches) or when the offsets are not a valid partition of the tokens. The
 * loop runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define R_BINS 4096 /* summary.server.R_HISTOGRAM_BINS */
#define T_BINS 20   /* summary.server.THRESHOLD_BINS */
#define SCALE 4294967296.0 /* rule.vectorized.THRESHOLD_SCALE, 2^32 */

typedef struct {
    int64_t passing, threshold_sum, examined_tokens, examined_sum, variance_sum;
    int64_t r_bins[R_BINS], t_bins[2 * T_BINS];
} Tallies;

/* The batch's decisions and tallies; 0 to decline. */
static int run_batch(const int64_t *offsets, Py_ssize_t runs, const double *p, const double *q, const double *r,
                     Py_ssize_t tokens, int64_t *accepted, Tallies *out) {
    if (offsets[0] != 0 || offsets[runs] != tokens) return 0;
    for (Py_ssize_t i = 0; i < runs; i++) {
        int64_t start = offsets[i], end = offsets[i + 1];
        if (end < start || end > tokens) return 0;
        int64_t kept = 0;
        int open = 1; /* no rejection yet: this token is examined */
        for (int64_t j = start; j < end; j++) {
            double t = p[j] / q[j];
            if (t > 1.0) t = 1.0; /* np.minimum(t, 1.0) for every t this kernel takes */
            double u = r[j];
            if (!(t >= 0.0 && t <= 1.0) || !(u >= 0.0 && u <= 1.0)) return 0;
            int pass = u <= t;
            int64_t fixed = (int64_t)rint(t * SCALE);
            out->passing += pass;
            out->threshold_sum += fixed;
            int64_t r_bin = (int64_t)(u * (double)R_BINS);
            out->r_bins[r_bin < R_BINS - 1 ? r_bin : R_BINS - 1]++;
            if (open) {
                int64_t t_bin = (int64_t)(t * (double)T_BINS);
                if (t_bin > T_BINS - 1) t_bin = T_BINS - 1;
                out->examined_tokens++;
                out->examined_sum += fixed;
                out->variance_sum += (int64_t)rint(t * (1.0 - t) * SCALE);
                out->t_bins[t_bin]++;
                out->t_bins[T_BINS + t_bin] += pass;
                if (pass) kept++;
                else open = 0;
            }
        }
        accepted[i] = kept;
    }
    return 1;
}

static int float64_buffer(PyObject *object, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return 0;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous float64 buffer", name);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *evaluate(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *offsets_object, *p_object, *q_object, *r_object;
    if (!PyArg_ParseTuple(args, "OOOO", &offsets_object, &p_object, &q_object, &r_object)) return NULL;
    Py_buffer offsets, p, q, r;
    if (PyObject_GetBuffer(offsets_object, &offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (offsets.itemsize != 8 || offsets.format == NULL || (strcmp(offsets.format, "l") != 0 && strcmp(offsets.format, "q") != 0) ||
        offsets.len < 8) {
        PyErr_SetString(PyExc_TypeError, "offsets: a contiguous int64 buffer of at least one offset");
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (!float64_buffer(p_object, &p, "p")) {
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (!float64_buffer(q_object, &q, "q")) {
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&p);
        return NULL;
    }
    if (!float64_buffer(r_object, &r, "r")) {
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&p);
        PyBuffer_Release(&q);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t runs = offsets.len / 8 - 1, tokens = p.len / 8;
    Tallies *tallies = (Tallies *)PyMem_Calloc(1, sizeof(Tallies));
    PyObject *accepted = PyByteArray_FromStringAndSize(NULL, runs * 8);
    if (tallies == NULL || accepted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int taken = 0;
    if (q.len == p.len && r.len == p.len) {
        const int64_t *offset_values = (const int64_t *)offsets.buf;
        int64_t *accepted_values = (int64_t *)PyByteArray_AS_STRING(accepted);
        Py_BEGIN_ALLOW_THREADS
        taken = run_batch(offset_values, runs, (const double *)p.buf, (const double *)q.buf, (const double *)r.buf,
                          tokens, accepted_values, tallies);
        Py_END_ALLOW_THREADS
    }
    if (!taken) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *r_bins = PyByteArray_FromStringAndSize((const char *)tallies->r_bins, sizeof tallies->r_bins);
    PyObject *t_bins = PyByteArray_FromStringAndSize((const char *)tallies->t_bins, sizeof tallies->t_bins);
    if (r_bins != NULL && t_bins != NULL)
        result = Py_BuildValue("(OLLLLLOO)", accepted, (long long)tallies->passing, (long long)tallies->threshold_sum,
                               (long long)tallies->examined_tokens, (long long)tallies->examined_sum,
                               (long long)tallies->variance_sum, r_bins, t_bins);
    Py_XDECREF(r_bins);
    Py_XDECREF(t_bins);
done:
    Py_XDECREF(accepted);
    PyMem_Free(tallies);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&p);
    PyBuffer_Release(&q);
    PyBuffer_Release(&r);
    return result;
}

static PyMethodDef methods[] = {
    {"evaluate", evaluate, METH_VARARGS,
     "evaluate(offsets, p, q, r) -> (accepted, passing, threshold_sum, examined_tokens, examined_sum, variance_sum, "
     "r_bins, t_bins) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rule_c", "The accept rule and its tallies over a batch, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rule_c(void) {
#if FLT_EVAL_METHOD != 0
    /* wider intermediate precision would round differently from numpy: the numpy path is used */
    PyErr_SetString(PyExc_ImportError, "FLT_EVAL_METHOD is not 0");
    return NULL;
#else
    return PyModule_Create(&module);
#endif
}
