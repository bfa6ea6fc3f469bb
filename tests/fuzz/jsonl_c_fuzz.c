/*
 * libFuzzer target for the compiled JSONL reader (specaccept_cli/_jsonl_c.c), built by `make fuzz` with
 * AddressSanitizer and UndefinedBehaviorSanitizer. The reader's source is included whole, so its static
 * functions are called directly, inside an embedded Python interpreter (they build Python objects).
 *
 * For every input:
 * - parse_block on the input as a block must return a 5-tuple or None, never raise, and an accepted
 *   block's buffers must agree with each other (as many lengths as lines, p, q and r as long as the
 *   lengths add up to);
 * - parse_block with the list keys of other rules (docs/rules.md: each key with its kind, a bonus token) must
 *   return a tuple of one buffer per list key, the lengths and the extras, or None; the lists the rule uses
 *   as long as the lengths add up to, the skipped one empty, token ids whole numbers below 10^15;
 * - when the input is one JSON number token, the reader's double must be the exact path's, bit for bit:
 *   float(int(token)) for an integer, float(token) for the rest (or the reader declines it); and the list
 *   reader (read_list_number: scanning and converting in one pass) must take the same token whole and
 *   give the same double.
 * A failed check aborts, so libFuzzer keeps the input.
 */
#include "../../specaccept_cli/_jsonl_c.c"

#include <stdio.h>
#include <stdlib.h>

static PyObject *keys, *extra_keys, *missing, *rule_keys, *rule_extra_keys;

#define CHECK(condition)                                                                  \
    do {                                                                                  \
        if (!(condition)) {                                                               \
            fprintf(stderr, "check failed: %s (%s:%d)\n", #condition, __FILE__, __LINE__); \
            if (PyErr_Occurred()) PyErr_Print();                                          \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    Py_Initialize();
    keys = Py_BuildValue("(yyy)", "p", "q", "r");
    extra_keys = Py_BuildValue("(yy)", "id", "model");
    missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    rule_keys = Py_BuildValue("(yyyyy)", "draft_tokens", "target_tokens", "residual", "entropy", "p");
    rule_extra_keys = Py_BuildValue("(yy)", "rule", "epsilon");
    CHECK(keys && extra_keys && missing && rule_keys && rule_extra_keys);
    return 0;
}

static void check_block(const uint8_t *data, size_t size) {
    PyObject *args = Py_BuildValue("(y#OOnO)", (const char *)data, (Py_ssize_t)size, keys, extra_keys,
                                   (Py_ssize_t)4096, missing);
    CHECK(args != NULL);
    PyObject *result = parse_block(NULL, args);
    CHECK(result != NULL);
    if (result != Py_None) {
        CHECK(PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 5);
        Py_ssize_t lines = 1;
        for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
        PyObject *sizes = PyTuple_GET_ITEM(result, 3);
        CHECK(PyByteArray_Check(sizes) && PyByteArray_GET_SIZE(sizes) == lines * (Py_ssize_t)sizeof(int64_t));
        int64_t total = 0;
        const int64_t *lengths = (const int64_t *)PyByteArray_AS_STRING(sizes);
        for (Py_ssize_t i = 0; i < lines; i++) {
            CHECK(lengths[i] >= 0);
            total += lengths[i];
        }
        for (int list = 0; list < 3; list++) {
            PyObject *values = PyTuple_GET_ITEM(result, list);
            CHECK(PyByteArray_Check(values) && PyByteArray_GET_SIZE(values) == total * (Py_ssize_t)sizeof(double));
        }
        PyObject *columns = PyTuple_GET_ITEM(result, 4);
        CHECK(PyList_Check(columns) && PyList_GET_SIZE(columns) == 2);
        for (int column = 0; column < 2; column++) CHECK(PyList_GET_SIZE(PyList_GET_ITEM(columns, column)) == lines);
    }
    Py_DECREF(result);
    Py_DECREF(args);
}

/* The kinds of rule_keys: two token lists (the second may hold the bonus token), a residual, any numbers, and
 * an optional probability list (absent or null, or as long as the draft with every value in [0, 1]). */
static const char RULE_KINDS[5] = {KIND_TOKEN, KIND_TOKEN, KIND_NULLABLE, KIND_NUMBER, KIND_SKIPPED};

static void check_rule_block(const uint8_t *data, size_t size) {
    PyObject *args = Py_BuildValue("(y#OOnOy#y#n)", (const char *)data, (Py_ssize_t)size, rule_keys,
                                   rule_extra_keys, (Py_ssize_t)4096, missing, "rule", (Py_ssize_t)4, RULE_KINDS,
                                   (Py_ssize_t)5, (Py_ssize_t)1);
    CHECK(args != NULL);
    PyObject *result = parse_block(NULL, args);
    CHECK(result != NULL);
    if (result != Py_None) {
        CHECK(PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 7);
        Py_ssize_t lines = 1;
        for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
        PyObject *sizes = PyTuple_GET_ITEM(result, 5);
        CHECK(PyByteArray_Check(sizes) && PyByteArray_GET_SIZE(sizes) == lines * (Py_ssize_t)sizeof(int64_t));
        int64_t total = 0;
        const int64_t *lengths = (const int64_t *)PyByteArray_AS_STRING(sizes);
        for (Py_ssize_t i = 0; i < lines; i++) {
            CHECK(lengths[i] >= 0);
            total += lengths[i];
        }
        for (int list = 0; list < 5; list++) {
            PyObject *values = PyTuple_GET_ITEM(result, list);
            Py_ssize_t size = PyByteArray_Check(values) ? PyByteArray_GET_SIZE(values) : -1;
            /* the optional list holds the values of the rows that carry it: at most every drafted position's */
            CHECK(list == 4 ? size >= 0 && size <= total * (Py_ssize_t)sizeof(double)
                            : size == total * (Py_ssize_t)sizeof(double));
            if (list == 4) {
                const double *unit = (const double *)PyByteArray_AS_STRING(values);
                for (Py_ssize_t i = 0; i < size / (Py_ssize_t)sizeof(double); i++) CHECK(unit[i] >= 0.0 && unit[i] <= 1.0);
            }
            if (list < 2) {
                const double *tokens = (const double *)PyByteArray_AS_STRING(values);
                for (int64_t i = 0; i < total; i++) CHECK(tokens[i] >= 0 && tokens[i] < 1e15 && tokens[i] == floor(tokens[i]));
            }
        }
        PyObject *columns = PyTuple_GET_ITEM(result, 6);
        CHECK(PyList_Check(columns) && PyList_GET_SIZE(columns) == 2);
        for (int column = 0; column < 2; column++) CHECK(PyList_GET_SIZE(PyList_GET_ITEM(columns, column)) == lines);
    }
    Py_DECREF(result);
    Py_DECREF(args);
}

static void check_number(const uint8_t *data, size_t size) {
    Cursor cursor = {data, data + size};
    const unsigned char *start;
    Py_ssize_t length;
    int integer;
    if (size == 0 || size > MAX_NUMBER_CHARS || !scan_number(&cursor, &start, &length, &integer) ||
        (size_t)length != size)
        return;
    double mine;
    if (!number_value(start, length, integer, &mine)) return; /* declined: the exact path reads it */
    /* the list reader scans and converts in one pass: the same token, the same double */
    Cursor again = {data, data + size};
    double listed;
    CHECK(read_list_number(&again, &listed) && again.s == data + size);
    CHECK(memcmp(&listed, &mine, sizeof mine) == 0);
    char text[MAX_NUMBER_CHARS + 1];
    memcpy(text, data, size);
    text[size] = '\0';
    double theirs;
    if (integer) {
        PyObject *value = PyLong_FromString(text, NULL, 10);
        CHECK(value != NULL);
        theirs = PyLong_AsDouble(value);
        Py_DECREF(value);
        CHECK(!PyErr_Occurred());
    } else {
        PyObject *string = PyUnicode_FromString(text), *value = string ? PyFloat_FromString(string) : NULL;
        CHECK(value != NULL);
        theirs = PyFloat_AS_DOUBLE(value);
        Py_DECREF(value);
        Py_DECREF(string);
    }
    if (memcmp(&mine, &theirs, sizeof mine) != 0) {
        fprintf(stderr, "number %s: reader %.17g, float() %.17g\n", text, mine, theirs);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_block(data, size);
    check_rule_block(data, size);
    check_number(data, size);
    return 0;
}
