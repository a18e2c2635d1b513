/* CRC-32C (Castagnoli) computed while the bytes are copied.

   Why: a batch's payload is built by copying its values, then checksummed. The
   checksum was a second pass over ~100 KiB (about 4 us in the append loop, a
   tenth of an append). Here the copy loads each 8 bytes into a register,
   stores them and feeds them to the CPU's CRC-32C instruction, so the checksum
   rides on the copy's loads.

   The instruction takes 3 cycles per 8 bytes but can start one per cycle, so
   one stream would run at a third of its speed: the bytes are split into three
   consecutive thirds, checksummed side by side, and combined. A CRC state is
   linear in the data: running bytes B from state s gives x^(8|B|) * s + run(0, B)
   (mod the polynomial), so state(A B C) = x^(8(|B|+|C|)) * state(A)
   + x^(8|C|) * run(0, B) + run(0, C). Powers x^(2^k) are tabulated once, as in
   zlib's crc32_combine.

   States here are the bare register (not inverted); the CRC of a message is the
   inverted state after running it from 0xFFFFFFFF. Only x86-64 has the
   instruction path; crc32c_copy_available() says whether it may be used.
*/

#include "_crc32c_copy.h"

#include <string.h>

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */
#define ONE 0x80000000u  /* x^0, reflected */

static uint32_t byte_table[256];
static uint32_t x2n_table[64]; /* x^(2^k) mod P; sizes here stay far below 2^60 */
static int initialised = 0;
static int hardware = 0;

/* a * b mod P, both reflected. */
static uint32_t multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = ONE; bit != 0; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return product;
}

/* state * x^(8 * bytes) mod P: the state after `bytes` zero bytes, from 0. */
static uint32_t shift(uint32_t state, size_t bytes) {
    uint32_t power = ONE;
    unsigned k = 3; /* x^(8n) = x^(n * 2^3) */
    for (size_t n = bytes; n != 0 && k < 64; n >>= 1, k++)
        if (n & 1) power = multiply(x2n_table[k], power);
    return multiply(power, state);
}

static void initialise(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int i = 0; i < 8; i++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        byte_table[n] = c;
    }
    x2n_table[0] = ONE >> 1; /* x^1 */
    for (int k = 1; k < 64; k++) x2n_table[k] = multiply(x2n_table[k - 1], x2n_table[k - 1]);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    hardware = __builtin_cpu_supports("sse4.2");
#endif
    initialised = 1;
}

int crc32c_copy_available(void) {
    if (!initialised) initialise();
    return hardware;
}

uint32_t crc32c_update(uint32_t state, const unsigned char *data, size_t len) {
    if (!initialised) initialise();
    for (size_t i = 0; i < len; i++) state = byte_table[(state ^ data[i]) & 0xFF] ^ (state >> 8);
    return state;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

/* One third of the bytes: where it stands in the pieces, and its state. */
typedef struct {
    const CopyPiece *piece;
    size_t at;   /* offset in the current piece */
    size_t left; /* bytes of this third still to run */
    uint32_t state;
} Cursor;

static Cursor cursor_at(const CopyPiece *pieces, size_t offset, size_t len, uint32_t state) {
    while (len > 0 && offset >= pieces->len) offset -= (pieces++)->len;
    Cursor cursor = {pieces, offset, len, state};
    return cursor;
}

/* Contiguous bytes the cursor can run now (only while left > 0). */
static size_t run_of(const Cursor *c) {
    size_t in_piece = c->piece->len - c->at;
    return in_piece < c->left ? in_piece : c->left;
}

static void advance(Cursor *c, size_t n) {
    c->at += n;
    c->left -= n;
    while (c->left > 0 && c->at == c->piece->len) {
        c->piece++;
        c->at = 0;
        __builtin_prefetch(c->piece->src);
    }
}

__attribute__((target("sse4.2"))) static void run_one(Cursor *c, size_t n) {
    const char *src = c->piece->src + c->at;
    char *dst = c->piece->dst + c->at;
    uint64_t state = c->state;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, src + i, 8);
        memcpy(dst + i, &word, 8);
        state = __builtin_ia32_crc32di(state, word);
    }
    for (; i < n; i++) {
        char byte = src[i];
        dst[i] = byte;
        state = __builtin_ia32_crc32qi((uint32_t)state, (unsigned char)byte);
    }
    c->state = (uint32_t)state;
    advance(c, n);
}

__attribute__((target("sse4.2"))) static void run_three(Cursor *a, Cursor *b, Cursor *c,
                                                         size_t n) {
    const char *sa = a->piece->src + a->at, *sb = b->piece->src + b->at,
               *sc = c->piece->src + c->at;
    char *da = a->piece->dst + a->at, *db = b->piece->dst + b->at, *dc = c->piece->dst + c->at;
    uint64_t xa = a->state, xb = b->state, xc = c->state;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, sa + i, 8);
        memcpy(&wb, sb + i, 8);
        memcpy(&wc, sc + i, 8);
        memcpy(da + i, &wa, 8);
        memcpy(db + i, &wb, 8);
        memcpy(dc + i, &wc, 8);
        xa = __builtin_ia32_crc32di(xa, wa);
        xb = __builtin_ia32_crc32di(xb, wb);
        xc = __builtin_ia32_crc32di(xc, wc);
    }
    a->state = (uint32_t)xa;
    b->state = (uint32_t)xb;
    c->state = (uint32_t)xc;
    advance(a, n);
    advance(b, n);
    advance(c, n);
}

uint32_t crc32c_copy(uint32_t state, const CopyPiece *pieces, size_t count, size_t total) {
    (void)count;
    size_t third = total / 3, last = total - 2 * third;
    Cursor a = cursor_at(pieces, 0, third, state);
    Cursor b = cursor_at(pieces, third, third, 0);
    Cursor c = cursor_at(pieces, 2 * third, last, 0);
    while (a.left && b.left && c.left) {
        size_t ra = run_of(&a), rb = run_of(&b), rc = run_of(&c);
        size_t n = ra < rb ? ra : rb;
        n = (n < rc ? n : rc) & ~(size_t)7;
        if (n > 0)
            run_three(&a, &b, &c, n);
        else /* a piece ends within 8 bytes in one of them: run that one to it */
            run_one(ra < 8 ? &a : rb < 8 ? &b : &c, ra < 8 ? ra : rb < 8 ? rb : rc);
    }
    while (a.left) run_one(&a, run_of(&a));
    while (b.left) run_one(&b, run_of(&b));
    while (c.left) run_one(&c, run_of(&c));
    return shift(a.state, third + last) ^ shift(b.state, last) ^ c.state;
}

#else

uint32_t crc32c_copy(uint32_t state, const CopyPiece *pieces, size_t count, size_t total) {
    (void)total;
    for (size_t i = 0; i < count; i++) {
        memmove(pieces[i].dst, pieces[i].src, pieces[i].len);
        state = crc32c_update(state, (const unsigned char *)pieces[i].dst, pieces[i].len);
    }
    return state;
}

#endif
