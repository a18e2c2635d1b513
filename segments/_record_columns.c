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

#include "_crc32c_copy.h"

#define FLAG_TIMESTAMPS 0x4
#define FLAG_KEYS 0x8
#define FLAG_HEADERS 0x10
#define PREFETCH_BYTES 2048
#define MAGIC 2
#define PREFIX_BYTES 16 /* base_offset i64, batch_length u32, crc u32 */
#define TAIL_BYTES 23   /* magic u8, flags u16, record_count u32, first_ts i64, max_ts i64 */

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
static void prefetch_value(const char *start, size_t size) {
#if defined(__GNUC__) || defined(__clang__)
    for (size_t at = 0; at < size && at < PREFETCH_BYTES; at += 64) __builtin_prefetch(start + at);
#else
    (void)start;
    (void)size;
#endif
}

static Py_ssize_t payload_size(Py_ssize_t count, const Totals *totals) {
    Py_ssize_t size = 4 * count + totals->keys_bytes + totals->headers_bytes +
                      totals->values_bytes;
    if (totals->flags & FLAG_TIMESTAMPS) size += 8 * count;
    if (totals->flags & FLAG_KEYS) size += 4 * count;
    if (totals->flags & FLAG_HEADERS) size += 4 * count;
    return size;
}

/* The length, timestamp, key-length and headers-length columns; returns their end. */
static char *write_columns(char *out, const Item *items, Py_ssize_t count, int flags) {
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
    return out;
}

/* Keys, encoded headers and values as pieces to copy from `out` on, in order;
   returns how many (at most 3 * count). */
static size_t record_pieces(CopyPiece *pieces, char *out, const Item *items, Py_ssize_t count,
                            int flags) {
    size_t n = 0;
    for (int column = 0; column < 3; column++) {
        if ((column == 0 && !(flags & FLAG_KEYS)) || (column == 1 && !(flags & FLAG_HEADERS)))
            continue;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *part = column == 0 ? items[i].key
                             : column == 1 ? items[i].headers : items[i].value;
            if (part == NULL || PyBytes_GET_SIZE(part) == 0) continue;
            pieces[n].src = PyBytes_AS_STRING(part);
            pieces[n].dst = out;
            pieces[n].len = (size_t)PyBytes_GET_SIZE(part);
            out += pieces[n++].len;
        }
    }
    return n;
}

static PyObject *write_payload(const Item *items, Py_ssize_t count, const Totals *totals) {
    PyObject *payload = PyBytes_FromStringAndSize(NULL, payload_size(count, totals));
    if (payload == NULL) return NULL;
    CopyPiece *pieces = PyMem_New(CopyPiece, 3 * count);
    if (pieces == NULL) {
        Py_DECREF(payload);
        return PyErr_NoMemory();
    }
    char *out = write_columns(PyBytes_AS_STRING(payload), items, count, totals->flags);
    size_t n = record_pieces(pieces, out, items, count, totals->flags);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n) prefetch_value(pieces[i + 1].src, pieces[i + 1].len);
        memcpy(pieces[i].dst, pieces[i].src, pieces[i].len);
    }
    PyMem_Free(pieces);
    return payload;
}

/* The records of one call, taken apart: 1 done, 0 not a common shape, -1 error. */
typedef struct {
    PyObject *snapshot; /* a tuple of the records: nothing the callback does frees one */
    PyObject *distinct; /* encoded headers by headers tuple */
    Item *items;
    Py_ssize_t count;
    Totals totals;
} Gathered;

static void release(Gathered *g) {
    PyMem_Free(g->items);
    Py_XDECREF(g->distinct);
    Py_XDECREF(g->snapshot);
}

static int gather(Gathered *g, PyObject *records, PyObject *encode_headers) {
    memset(g, 0, sizeof *g);
    if ((g->snapshot = PySequence_Tuple(records)) == NULL) return -1;
    g->count = PyTuple_GET_SIZE(g->snapshot);
    if (g->count == 0 || g->count > (Py_ssize_t)UINT32_MAX) return 0;
    if ((g->items = PyMem_New(Item, g->count)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *first = PyTuple_GET_ITEM(g->snapshot, 0), *last_headers = NULL,
             *last_encoded = NULL;
    if (!PyTuple_Check(first) || PyTuple_GET_SIZE(first) != 4) return 0;
    PyObject *first_timestamp = PyTuple_GET_ITEM(first, 1);
    int overflow = 0;
    if (!PyLong_CheckExact(first_timestamp)) return 0;
    g->totals.first_timestamp_ms = PyLong_AsLongLongAndOverflow(first_timestamp, &overflow);
    if (overflow) return 0;
    if (g->totals.first_timestamp_ms == -1 && PyErr_Occurred()) return -1;
    g->totals.max_timestamp_ms = g->totals.first_timestamp_ms;
    for (Py_ssize_t i = 0; i < g->count; i++) {
        int taken = take_record(PyTuple_GET_ITEM(g->snapshot, i), &g->items[i], &g->totals,
                                &g->distinct, encode_headers, &last_headers, &last_encoded);
        if (taken <= 0) return taken;
    }
    return 1;
}

static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode(records, encode_headers)");
        return NULL;
    }
    Gathered g;
    int gathered = gather(&g, args[0], args[1]);
    PyObject *result = NULL;
    if (gathered == 0) {
        result = Py_NewRef(Py_None);
    } else if (gathered > 0) {
        PyObject *payload = write_payload(g.items, g.count, &g.totals);
        if (payload != NULL)
            result = Py_BuildValue("(NiLL)", payload, g.totals.flags,
                                   g.totals.first_timestamp_ms, g.totals.max_timestamp_ms);
    }
    release(&g);
    return result;
}

/* The batch header (record_batch.py) with its CRC, and the payload, copied and
   checksummed in one pass. */
static PyObject *write_batch(const Gathered *g, long long base_offset) {
    Py_ssize_t size = payload_size(g->count, &g->totals);
    if (size > (Py_ssize_t)UINT32_MAX - 4 - TAIL_BYTES) return Py_NewRef(Py_None);
    PyObject *payload = PyBytes_FromStringAndSize(NULL, size);
    CopyPiece *pieces = PyMem_New(CopyPiece, 3 * g->count + 1);
    if (payload == NULL || pieces == NULL) {
        Py_XDECREF(payload);
        PyMem_Free(pieces);
        return PyErr_NoMemory();
    }
    char *start = PyBytes_AS_STRING(payload);
    char *out = write_columns(start, g->items, g->count, g->totals.flags);
    pieces[0].src = pieces[0].dst = start; /* the columns: in place, checksummed only */
    pieces[0].len = (size_t)(out - start);
    size_t n = 1 + record_pieces(pieces + 1, out, g->items, g->count, g->totals.flags);
    unsigned char head[PREFIX_BYTES + TAIL_BYTES];
    put_u64((char *)head, (uint64_t)base_offset);
    put_u32((char *)head + 8, (uint32_t)(4 + TAIL_BYTES + size));
    unsigned char *tail = head + PREFIX_BYTES;
    tail[0] = MAGIC;
    tail[1] = (unsigned char)g->totals.flags;
    tail[2] = (unsigned char)(g->totals.flags >> 8);
    put_u32((char *)tail + 3, (uint32_t)g->count);
    put_u64((char *)tail + 7, (uint64_t)g->totals.first_timestamp_ms);
    put_u64((char *)tail + 15, (uint64_t)g->totals.max_timestamp_ms);
    uint32_t state = crc32c_update(0xFFFFFFFFu, head, 8); /* the base offset, then the tail */
    state = crc32c_update(state, tail, TAIL_BYTES);
    state = crc32c_copy(state, pieces, n, (size_t)size);
    put_u32((char *)head + 12, ~state);
    PyMem_Free(pieces);
    return Py_BuildValue("(y#NLL)", (const char *)head, (Py_ssize_t)sizeof head, payload,
                         g->totals.first_timestamp_ms, g->totals.max_timestamp_ms);
}

static PyObject *encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(records, encode_headers, base_offset)");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[2]);
    if (base_offset == -1 && PyErr_Occurred()) return NULL;
    if (!crc32c_copy_available() || base_offset < 0) Py_RETURN_NONE;
    Gathered g;
    int gathered = gather(&g, args[0], args[1]);
    PyObject *result = gathered > 0 ? write_batch(&g, base_offset)
                       : gathered == 0 ? Py_NewRef(Py_None) : NULL;
    release(&g);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(records, encode_headers) -> (payload, flags, first_ts, max_ts) or None"},
    {"encode_batch", (PyCFunction)(void (*)(void))encode_batch, METH_FASTCALL,
     "encode_batch(records, encode_headers, base_offset) -> (head, payload, first_ts, max_ts)"
     " or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_record_columns",
    "The record columns of a batch payload in one pass (see record_columns.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__record_columns(void) { return PyModule_Create(&module_def); }
