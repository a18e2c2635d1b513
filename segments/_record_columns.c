/* The record columns of a batch payload, encoded in one pass in C.

   Why: encoding 100 records of 1 KiB in Python is a handful of Python-level
   passes over the records (columns, lengths, timestamps, maximum), about as
   long as writing the batch to the page cache; in C it is one pass and one
   copy (docs/benchmarks.md).

   The layout is the one segments/record_columns.py documents, and its
   `encode_columns_python` is the reference. This encoder takes only the
   common shapes: tuples of four (a Record), `bytes` values and keys (or None),
   `int` timestamps that fit in 64 bits, tuple headers. For anything else it
   returns None and the caller uses the reference, which also raises the
   errors, so both give the same result for every input. Encoded headers come
   from the `encode_headers` callable, once per distinct headers tuple, as in
   the reference.

   encode(records, encode_headers) -> (payload, flags, first_ts, max_ts) | None
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FLAG_TIMESTAMPS 0x4
#define FLAG_KEYS 0x8
#define FLAG_HEADERS 0x10
#define PREFETCH_BYTES 2048

typedef struct {
    PyObject *value;   /* borrowed from the record, which `snapshot` holds */
    PyObject *key;     /* NULL: no key */
    PyObject *headers; /* encoded headers, borrowed from `distinct`; NULL: none */
    long long timestamp_ms;
} Item;

typedef struct {
    Py_ssize_t values_bytes;
    Py_ssize_t keys_bytes;
    Py_ssize_t headers_bytes;
    long long first_timestamp_ms;
    long long max_timestamp_ms;
    int flags;
} Totals;

static void put_u32(char *out, uint32_t value) {
    out[0] = (char)value;
    out[1] = (char)(value >> 8);
    out[2] = (char)(value >> 16);
    out[3] = (char)(value >> 24);
}

static void put_u64(char *out, uint64_t value) {
    put_u32(out, (uint32_t)value);
    put_u32(out + 4, (uint32_t)(value >> 32));
}

/* 1: encoded into *item; 0: not a common shape (use the reference); -1: error. */
static int take_record(PyObject *record, Item *item, Totals *totals, PyObject **distinct,
                       PyObject *encode_headers, PyObject **last_headers,
                       PyObject **last_encoded) {
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4) return 0;
    PyObject *value = PyTuple_GET_ITEM(record, 0);
    PyObject *timestamp = PyTuple_GET_ITEM(record, 1);
    PyObject *key = PyTuple_GET_ITEM(record, 2);
    PyObject *headers = PyTuple_GET_ITEM(record, 3);
    if (!PyBytes_CheckExact(value) || PyBytes_GET_SIZE(value) > (Py_ssize_t)UINT32_MAX) return 0;
    if (!PyLong_CheckExact(timestamp)) return 0;
    int overflow = 0;
    long long timestamp_ms = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
    if (overflow) return 0;
    if (timestamp_ms == -1 && PyErr_Occurred()) return -1;
    if (key != Py_None &&
        (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) > (Py_ssize_t)INT32_MAX)) return 0;
    if (!PyTuple_CheckExact(headers)) return 0;
    PyObject *encoded = NULL;
    if (PyTuple_GET_SIZE(headers) > 0) {
        if (headers == *last_headers) {
            encoded = *last_encoded;
        } else {
            if (*distinct == NULL && (*distinct = PyDict_New()) == NULL) return -1;
            encoded = PyDict_GetItemWithError(*distinct, headers);
            if (encoded == NULL) {
                if (PyErr_Occurred()) return -1;
                PyObject *made = PyObject_CallOneArg(encode_headers, headers);
                if (made == NULL) return -1;
                int stored = PyBytes_CheckExact(made) ? PyDict_SetItem(*distinct, headers, made)
                                                      : -2;
                Py_DECREF(made); /* `distinct` holds it */
                if (stored == -2) {
                    PyErr_SetString(PyExc_TypeError, "encode_headers must return bytes");
                    return -1;
                }
                if (stored < 0) return -1;
                encoded = made;
            }
            *last_headers = headers;
            *last_encoded = encoded;
        }
        if (PyBytes_GET_SIZE(encoded) > (Py_ssize_t)UINT32_MAX) return 0;
        totals->flags |= FLAG_HEADERS;
        totals->headers_bytes += PyBytes_GET_SIZE(encoded);
    }
    if (key != Py_None) {
        totals->flags |= FLAG_KEYS;
        totals->keys_bytes += PyBytes_GET_SIZE(key);
        item->key = key;
    } else {
        item->key = NULL;
    }
    item->value = value;
    item->headers = encoded;
    item->timestamp_ms = timestamp_ms;
    totals->values_bytes += PyBytes_GET_SIZE(value);
    if (timestamp_ms != totals->first_timestamp_ms) totals->flags |= FLAG_TIMESTAMPS;
    if (timestamp_ms > totals->max_timestamp_ms) totals->max_timestamp_ms = timestamp_ms;
    return 1;
}

/* Values are separate objects spread over the heap, so each starts a new stream
   of cache misses; fetching the next one's first lines while this one is copied
   hides most of them (values a batch encodes are often no longer cached). */
static void prefetch_value(PyObject *value) {
#if defined(__GNUC__) || defined(__clang__)
    const char *start = PyBytes_AS_STRING(value);
    Py_ssize_t size = PyBytes_GET_SIZE(value);
    for (Py_ssize_t at = 0; at < size && at < PREFETCH_BYTES; at += 64)
        __builtin_prefetch(start + at);
#else
    (void)value;
#endif
}

static PyObject *write_payload(const Item *items, Py_ssize_t count, const Totals *totals) {
    int flags = totals->flags;
    Py_ssize_t size = 4 * count + totals->keys_bytes + totals->headers_bytes +
                      totals->values_bytes;
    if (flags & FLAG_TIMESTAMPS) size += 8 * count;
    if (flags & FLAG_KEYS) size += 4 * count;
    if (flags & FLAG_HEADERS) size += 4 * count;
    PyObject *payload = PyBytes_FromStringAndSize(NULL, size);
    if (payload == NULL) return NULL;
    char *out = PyBytes_AS_STRING(payload);
    for (Py_ssize_t i = 0; i < count; i++, out += 4)
        put_u32(out, (uint32_t)PyBytes_GET_SIZE(items[i].value));
    if (flags & FLAG_TIMESTAMPS)
        for (Py_ssize_t i = 0; i < count; i++, out += 8)
            put_u64(out, (uint64_t)items[i].timestamp_ms);
    if (flags & FLAG_KEYS)
        for (Py_ssize_t i = 0; i < count; i++, out += 4)
            put_u32(out, items[i].key ? (uint32_t)PyBytes_GET_SIZE(items[i].key) : UINT32_MAX);
    if (flags & FLAG_HEADERS)
        for (Py_ssize_t i = 0; i < count; i++, out += 4)
            put_u32(out, items[i].headers ? (uint32_t)PyBytes_GET_SIZE(items[i].headers) : 0);
    if (flags & FLAG_KEYS)
        for (Py_ssize_t i = 0; i < count; i++) {
            if (items[i].key == NULL) continue;
            memcpy(out, PyBytes_AS_STRING(items[i].key), PyBytes_GET_SIZE(items[i].key));
            out += PyBytes_GET_SIZE(items[i].key);
        }
    if (flags & FLAG_HEADERS)
        for (Py_ssize_t i = 0; i < count; i++) {
            if (items[i].headers == NULL) continue;
            memcpy(out, PyBytes_AS_STRING(items[i].headers), PyBytes_GET_SIZE(items[i].headers));
            out += PyBytes_GET_SIZE(items[i].headers);
        }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i + 1 < count) prefetch_value(items[i + 1].value);
        memcpy(out, PyBytes_AS_STRING(items[i].value), PyBytes_GET_SIZE(items[i].value));
        out += PyBytes_GET_SIZE(items[i].value);
    }
    return payload;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode(records, encode_headers)");
        return NULL;
    }
    /* A tuple of the records, so nothing the callback does can free one in use. */
    PyObject *snapshot = PySequence_Tuple(args[0]);
    if (snapshot == NULL) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(snapshot);
    if (count == 0 || count > (Py_ssize_t)UINT32_MAX) {
        Py_DECREF(snapshot);
        Py_RETURN_NONE;
    }
    Item *items = PyMem_New(Item, count);
    if (items == NULL) {
        Py_DECREF(snapshot);
        return PyErr_NoMemory();
    }
    PyObject *distinct = NULL, *last_headers = NULL, *last_encoded = NULL, *result = NULL;
    Totals totals = {0, 0, 0, 0, 0, 0};
    PyObject *first_timestamp = PyTuple_Check(PyTuple_GET_ITEM(snapshot, 0)) &&
                                        PyTuple_GET_SIZE(PyTuple_GET_ITEM(snapshot, 0)) == 4
                                    ? PyTuple_GET_ITEM(PyTuple_GET_ITEM(snapshot, 0), 1)
                                    : NULL;
    int overflow = 0;
    if (first_timestamp == NULL || !PyLong_CheckExact(first_timestamp)) goto reference;
    totals.first_timestamp_ms = PyLong_AsLongLongAndOverflow(first_timestamp, &overflow);
    if (overflow) goto reference;
    if (totals.first_timestamp_ms == -1 && PyErr_Occurred()) goto done;
    totals.max_timestamp_ms = totals.first_timestamp_ms;
    for (Py_ssize_t i = 0; i < count; i++) {
        int taken = take_record(PyTuple_GET_ITEM(snapshot, i), &items[i], &totals, &distinct,
                                args[1], &last_headers, &last_encoded);
        if (taken < 0) goto done;
        if (taken == 0) goto reference;
    }
    PyObject *payload = write_payload(items, count, &totals);
    if (payload != NULL)
        result = Py_BuildValue("(NiLL)", payload, totals.flags, totals.first_timestamp_ms,
                               totals.max_timestamp_ms);
    goto done;
reference:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(items);
    Py_XDECREF(distinct);
    Py_DECREF(snapshot);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(records, encode_headers) -> (payload, flags, first_ts, max_ts) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_record_columns",
    "The record columns of a batch payload in one pass (see record_columns.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__record_columns(void) { return PyModule_Create(&module_def); }
