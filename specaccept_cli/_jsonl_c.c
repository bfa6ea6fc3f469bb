/*
 * specaccept_cli._jsonl_c: a strict reader for whole JSONL blocks of runs, or a refusal.
 *
 * parse_block(text, keys, extra_keys, max_line_bytes) reads a block (lines joined by "\n", no newline
 * at the end) in which every line is one JSON object, and returns
 *     (p, q, r, lengths, extras)
 * p, q and r: bytearrays of float64 holding every row's list of that key, one row after another;
 * lengths: a bytearray of int64, the length of each row's p list (q and r lengths are checked equal);
 * extras: one list per extra key, a row's value (str, int, float, bool, None) or a missing marker (the
 * `missing` object given).
 * It returns None ("decline") whenever it is not sure that orjson, line by line, would read exactly the
 * same values: a grammar error anywhere, invalid UTF-8, a lone surrogate escape, a key of ours repeated
 * or written with escapes, a list element that is not a number, a number that does not fit, an integer
 * of more than 18 digits, a list value out of its range (p and r in [0, 1], q in (0, 1]: the exact path
 * reports it), nesting deeper than MAX_DEPTH, an over-long, blank or whitespace-padded line, a
 * byte order mark, an extra value that is a list, an object or an escaped string, or a rule key (the optional
 * sixth argument, b"rule" by default, b"" for none: the top-level key of the field naming a row's verification
 * rule) that is not among the extra keys (a row of another verification rule, maybe). A declined block
 * goes unchanged to the exact path, which words every error; this reader never has to.
 *
 * Rows of another verification rule (docs/rules.md): with `kinds` (the seventh argument, a byte per list key)
 * and `bonus` (the eighth), `keys` may be one to MAX_LISTS list keys, each read as its kind says (see the KIND_
 * values), and the result is (one bytearray of float64 per list key, ..., lengths, extras): a row lacking a
 * list key (but a skipped one) is declined, the lists of a row must have the first one's length, and list
 * `bonus` may hold one entry more (the target's token at the bonus position), dropped here.
 *
 * Numbers: the JSON grammar is checked here, then a token with a fraction or an exponent is converted by
 * Python's own correctly rounded PyOS_string_to_double, an integer token exactly as float(int) converts
 * (an int64 cast to double: round to nearest, ties to even), as orjson's ints become floats on the
 * exact path. Both give the one correctly rounded double, so the values are the same bit for bit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define MAX_DEPTH 64
/* The default key of a row's verification rule: a row holding it is declined unless the caller asks for it as an
 * extra. */
#define RULE_KEY "rule"
#define RULE_KEY_SIZE 4
#if defined(__GNUC__) || defined(__clang__)
#define HOT_INLINE inline __attribute__((always_inline)) /* the per-number steps: no call per number */
#else
#define HOT_INLINE inline
#endif
#define MAX_NUMBER_CHARS 64
#define MAX_INT_DIGITS 18
#define MAX_FINITE_INT_DIGITS 300

typedef struct {
    double *data;
    Py_ssize_t size, capacity;
} Doubles;

typedef struct {
    const unsigned char *s, *end;
} Cursor;

static int doubles_push(Doubles *buffer, double value) {
    if (buffer->size == buffer->capacity) {
        Py_ssize_t capacity = buffer->capacity ? buffer->capacity * 2 : 4096;
        double *grown = (double *)PyMem_Realloc(buffer->data, (size_t)capacity * sizeof(double));
        if (grown == NULL) return -1;
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    buffer->data[buffer->size++] = value;
    return 0;
}

static inline void skip_space(Cursor *c) {
    /* nearly always no whitespace at all: one comparison says so (every whitespace byte is at most ' ') */
    while (c->s < c->end && *c->s <= ' ' && (*c->s == ' ' || *c->s == '\t' || *c->s == '\r')) c->s++;
}

static int hex_value(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_hex4(const unsigned char *s, const unsigned char *end, unsigned *out) {
    unsigned value = 0;
    if (end - s < 4) return 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_value(s[i]);
        if (digit < 0) return 0;
        value = value * 16 + (unsigned)digit;
    }
    *out = value;
    return 1;
}

/* One UTF-8 sequence starting at s (its first byte >= 0x80): its length, or 0 if invalid. */
static int utf8_length(const unsigned char *s, const unsigned char *end) {
    unsigned char b0 = s[0];
    Py_ssize_t left = end - s;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return (left >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (left < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (b0 == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (b0 == 0xED && s[1] >= 0xA0) return 0; /* a surrogate */
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (left < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (b0 == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
        if (b0 == 0xF4 && s[1] >= 0x90) return 0; /* beyond U+10FFFF */
        return 4;
    }
    return 0;
}

/* A string, the cursor on its opening quote. Sets the span of its contents and whether it holds an escape.
 * Returns 1, or 0 for anything orjson might not read as we would. */
static int read_string(Cursor *c, const unsigned char **start, Py_ssize_t *length, int *escaped) {
    const unsigned char *s = c->s + 1, *end = c->end;
    *escaped = 0;
    *start = s;
    while (s < end) {
        unsigned char ch = *s;
        if (ch == '"') {
            *length = s - *start;
            c->s = s + 1;
            return 1;
        }
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            *escaped = 1;
            if (s + 1 >= end) return 0;
            unsigned char kind = s[1];
            if (kind == 'u') {
                unsigned unit;
                if (!read_hex4(s + 2, end, &unit)) return 0;
                if (unit >= 0xDC00 && unit <= 0xDFFF) return 0; /* a lone low surrogate */
                if (unit >= 0xD800 && unit <= 0xDBFF) {
                    unsigned low;
                    if (end - (s + 6) < 6 || s[6] != '\\' || s[7] != 'u' || !read_hex4(s + 8, end, &low)) return 0;
                    if (low < 0xDC00 || low > 0xDFFF) return 0;
                    s += 12;
                } else {
                    s += 6;
                }
                continue;
            }
            if (kind == '"' || kind == '\\' || kind == '/' || kind == 'b' || kind == 'f' || kind == 'n' ||
                kind == 'r' || kind == 't') {
                s += 2;
                continue;
            }
            return 0;
        }
        if (ch >= 0x80) {
            int n = utf8_length(s, end);
            if (n == 0) return 0;
            s += n;
            continue;
        }
        s++;
    }
    return 0;
}

/* A number token by the JSON grammar; sets whether it is an integer (no fraction, no exponent). */
static int scan_number(Cursor *c, const unsigned char **start, Py_ssize_t *length, int *integer) {
    const unsigned char *s = c->s, *end = c->end;
    *start = s;
    *integer = 1;
    if (s < end && *s == '-') s++;
    if (s >= end) return 0;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (s < end && *s >= '0' && *s <= '9') s++;
    } else {
        return 0;
    }
    if (s < end && *s == '.') {
        *integer = 0;
        s++;
        if (s >= end || *s < '0' || *s > '9') return 0;
        while (s < end && *s >= '0' && *s <= '9') s++;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        *integer = 0;
        s++;
        if (s < end && (*s == '+' || *s == '-')) s++;
        if (s >= end || *s < '0' || *s > '9') return 0;
        while (s < end && *s >= '0' && *s <= '9') s++;
    }
    *length = s - *start;
    c->s = s;
    return 1;
}

static const uint64_t POWERS_OF_TEN[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
    10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
    1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
    10000000000000000000ULL,
};

#if defined(__SIZEOF_INT128__)
static int bit_length(uint64_t value) { return value ? 64 - __builtin_clzll(value) : 0; }

/* floor(numerator / divisor) and the remainder, for a quotient below 2^64: one x86-64 DIV where there is
 * one, the compiler's 128-bit division elsewhere. */
static inline uint64_t divide_128(unsigned __int128 numerator, uint64_t divisor, uint64_t *rest) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t high = (uint64_t)(numerator >> 64), low = (uint64_t)numerator, quotient, remainder;
    __asm__("divq %4" : "=a"(quotient), "=d"(remainder) : "a"(low), "d"(high), "r"(divisor));
    *rest = remainder;
    return quotient;
#else
    unsigned __int128 quotient = numerator / divisor;
    *rest = (uint64_t)(numerator - quotient * divisor);
    return (uint64_t)quotient;
#endif
}

/* w / 10^n correctly rounded (ties to even), for w < 2^64 and n <= 19, with exact integer arithmetic:
 * w 2^s / 10^n = N + rest / 10^n with N in [2^52, 2^53), so N rounded by `rest` is the 53-bit mantissa,
 * and N 2^-s is exact (the value is at least 10^-19, far from subnormal). s is chosen before dividing:
 * w 2^s has as many bits as 10^n 2^53, and one fewer when w 2^s >= 10^n 2^53 (N would reach 2^53).
 * Returns 0 when w / 10^n is 2^53 or more (s would be negative): dtoa's. */
static int divide_by_power_of_ten(uint64_t w, int n, double *out) {
    uint64_t divisor = POWERS_OF_TEN[n];
    int s = 53 + bit_length(divisor) - bit_length(w);
    if (s > 120) return 0;
    unsigned __int128 limit = (unsigned __int128)divisor << 53;
    if (s >= 0 && ((unsigned __int128)w << s) >= limit) s--;
    if (s < 0) return 0;
    unsigned __int128 scaled = (unsigned __int128)w << s;
    /* the quotient is now in [2^52, 2^53): w 2^s has at most one bit more than 10^n 2^52 */
    if (scaled >= limit || scaled < (limit >> 1)) return 0; /* cannot happen; dtoa's if it did */
    uint64_t rest, mantissa = divide_128(scaled, divisor, &rest);
    if (2 * (unsigned __int128)rest > divisor || (2 * (unsigned __int128)rest == divisor && (mantissa & 1))) mantissa++;
    /* mantissa 2^-s, exactly: 2^-s is a normal double (s <= 120) and so is the product (at least 10^-19) */
    uint64_t scale_bits = (uint64_t)(1023 - s) << 52;
    double scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    *out = (double)mantissa * scale;
    return 1;
}
#else
/* no 128-bit integers (MSVC): every fraction goes to dtoa */
static int divide_by_power_of_ten(uint64_t w, int n, double *out) {
    (void)w;
    (void)n;
    (void)out;
    return 0;
}
#endif

/* The double of the token `start`..`start + length` by Python's own correctly rounded conversion (dtoa.c):
 * for what the exact arithmetic here does not cover. 0 to decline. */
static int dtoa_value(const unsigned char *start, Py_ssize_t length, double *out) {
    char text[MAX_NUMBER_CHARS + 1];
    if (length > MAX_NUMBER_CHARS) return 0;
    memcpy(text, start, (size_t)length);
    text[length] = '\0';
    char *stop = NULL;
    double value = PyOS_string_to_double(text, &stop, NULL); /* overflow gives +-inf, no exception */
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != text + length || !isfinite(value)) return 0;
    *out = value;
    return 1;
}

/* 10^n as a double for n <= 27: exact up to 10^22, the nearest double beyond (a candidate only). */
static const double DOUBLE_POWERS_OF_TEN[28] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11, 1e12, 1e13,
    1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27,
};

/* 5^n for n <= 27 (5^27 < 2^63). */
static const uint64_t POWERS_OF_FIVE[28] = {
    1ULL,
    5ULL,
    25ULL,
    125ULL,
    625ULL,
    3125ULL,
    15625ULL,
    78125ULL,
    390625ULL,
    1953125ULL,
    9765625ULL,
    48828125ULL,
    244140625ULL,
    1220703125ULL,
    6103515625ULL,
    30517578125ULL,
    152587890625ULL,
    762939453125ULL,
    3814697265625ULL,
    19073486328125ULL,
    95367431640625ULL,
    476837158203125ULL,
    2384185791015625ULL,
    11920928955078125ULL,
    59604644775390625ULL,
    298023223876953125ULL,
    1490116119384765625ULL,
    7450580596923828125ULL,
};

#if defined(__SIZEOF_INT128__)
/* w / 10^n correctly rounded, for 1 <= n <= 27 and w < 2^64, when a cheap candidate can be proven right;
 * 0 when it cannot (the caller then takes an exact division or dtoa).
 *
 * The candidate x = w / 10^n in double arithmetic is within a few units in the last place. Write it
 * x = M 2^e (M its 53-bit significand, 2^52 <= M < 2^53). The values that round to x (ties to even) are
 * those between (2M - 1) 2^(e-1) and (2M + 1) 2^(e-1), the ends included when M is even. With
 * w / 10^n = w / (5^n 2^n), multiplying through by 5^n 2^(1-n-e) turns the test into integers:
 * (2M - 1) 5^n < w 2^t < (2M + 1) 5^n with t = 1 - n - e. Every product is below 2^118, so the test is
 * exact in 128 bits. M = 2^52 is left out: below it the next double is only half a unit away, so the
 * lower end of the test would be too wide.
 *
 * When x is not the answer (31% of the numbers that reach this test in simulated logs: w is rounded to a
 * double before the division), the answer is a neighbour: the doubles M' 2^e of the same binade have the
 * adjacent intervals ((2M' - 1) 5^n, (2M' + 1) 5^n) on the same scale, so the test walks M' up or down by
 * one, each step two 128-bit additions, until an interval holds X (ties to the even M'). Any M' with
 * 2^52 < M' < 2^53 whose interval holds X is the answer, whichever binade x came from; the walk stays
 * there and takes at most three steps, and otherwise the exact division (a 128-bit DIV) decides. */
static HOT_INLINE int proven_quotient(uint64_t w, int n, double *out) {
    double x = (double)w / DOUBLE_POWERS_OF_TEN[n];
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7FF);
    uint64_t M = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    if (biased == 0 || biased == 0x7FF || M == ((uint64_t)1 << 52)) return 0;
    int t = 1 - n - (biased - 1075);
    if (t < 0 || (t > 63 && bit_length(w) + t > 127)) return 0;
    uint64_t five = POWERS_OF_FIVE[n]; /* 64 by 64 bit products below: one multiplication each */
    unsigned __int128 X = (unsigned __int128)w << t, step = (unsigned __int128)2 * five;
    unsigned __int128 high = (unsigned __int128)(2 * M + 1) * five, low = high - step;
    for (int moves = 0;; moves++) {
        if (X > low && X < high) break;
        if ((X == low || X == high) && (M & 1) == 0) break; /* a tie: the even significand's */
        if (moves == 3) return 0;
        if (X >= high) { /* X == high with M odd: M + 1, even, holds it as its lower end */
            M++;
            low = high;
            high += step;
        } else {
            M--;
            high = low;
            low -= step;
        }
        if (M <= ((uint64_t)1 << 52) || M >= ((uint64_t)1 << 53)) return 0; /* left the binade */
    }
    bits = ((uint64_t)biased << 52) | (M & (((uint64_t)1 << 52) - 1));
    memcpy(out, &bits, sizeof bits);
    return 1;
}
#else
static int proven_quotient(uint64_t w, int n, double *out) {
    (void)w;
    (void)n;
    (void)out;
    return 0;
}
#endif

/* The double of w 10^scale (w < 2^64, the token's digits without sign or point), or 0 for dtoa. */
static HOT_INLINE int exact_value(uint64_t w, int scale, double *out) {
    if (w == 0) {
        *out = 0.0;
        return 1;
    }
    if (scale == 0) {
        if (w >= ((uint64_t)1 << 63)) return 0;
        *out = (double)(int64_t)w; /* an exact integer, rounded once */
        return 1;
    }
    if (scale < 0 && scale >= -22 && w < ((uint64_t)1 << 53) && FLT_EVAL_METHOD == 0) {
        /* Clinger's fast path: w and 10^n are exact doubles, and one IEEE division rounds correctly
         * (with no wider intermediate precision, hence FLT_EVAL_METHOD) */
        *out = (double)w / DOUBLE_POWERS_OF_TEN[-scale];
        return 1;
    }
    if (scale < 0 && scale >= -27 && proven_quotient(w, -scale, out)) return 1;
    if (scale < 0 && scale >= -19) return divide_by_power_of_ten(w, -scale, out);
    if (scale > 0 && scale <= 19 && w <= UINT64_MAX / POWERS_OF_TEN[scale]) {
        uint64_t product = w * POWERS_OF_TEN[scale];
        if (product >= ((uint64_t)1 << 63)) return 0;
        *out = (double)(int64_t)product; /* an exact integer, rounded once */
        return 1;
    }
    return 0;
}

/* The double of a number token, as the exact path would make it; 0 to decline. */
static int number_value(const unsigned char *start, Py_ssize_t length, int integer, double *out) {
    const unsigned char *s = start, *end = start + length;
    int negative = (*s == '-');
    if (negative) s++;
    if (integer) {
        Py_ssize_t digits = end - s;
        if (digits > MAX_INT_DIGITS) return 0;
        int64_t value = 0;
        for (; s < end; s++) value = value * 10 + (*s - '0');
        *out = (double)(negative ? -value : value); /* "-0" is the int 0: +0.0, as float(0) */
        return 1;
    }
    /* Decimal significand w and exponent: value = w 10^(exponent - fraction digits). */
    uint64_t w = 0;
    int digits = 0, fraction = 0;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (digits || *s != '0') digits++;
        if (digits > 19) return dtoa_value(start, length, out);
        w = w * 10 + (uint64_t)(*s - '0');
    }
    if (s < end && *s == '.') {
        for (s++; s < end && *s >= '0' && *s <= '9'; s++) {
            if (digits || *s != '0') digits++;
            if (digits > 19) return dtoa_value(start, length, out);
            w = w * 10 + (uint64_t)(*s - '0');
            fraction++;
        }
    }
    int exponent = 0;
    if (s < end && (*s == 'e' || *s == 'E')) {
        int minus = 0;
        s++;
        if (*s == '+' || *s == '-') minus = (*s++ == '-');
        for (; s < end; s++) {
            if (exponent > 10000) return dtoa_value(start, length, out);
            exponent = exponent * 10 + (*s - '0');
        }
        if (minus) exponent = -exponent;
    }
    double value;
    if (!exact_value(w, exponent - fraction, &value)) return dtoa_value(start, length, out);
    *out = negative ? -value : value;
    return 1;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define EIGHT_AT_ONCE 1
/* Whether the eight bytes (loaded little-endian) are all ASCII digits: each byte's high nibble is 3 and
 * adding 6 does not carry into it. */
static inline int eight_digits(uint64_t v) {
    return ((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ==
           0x3333333333333333ULL;
}

/* The value of eight ASCII digits (the first byte the most significant), by pairing digits, then pairs
 * of pairs, then the two halves: three multiplications instead of eight dependent steps. */
static inline uint64_t eight_digit_value(uint64_t v) {
    v -= 0x3030303030303030ULL;
    v = v * 10 + (v >> 8); /* byte 2i: digits 2i and 2i+1 as a number below 100 */
    uint64_t pairs = v & 0x00FF00FF00FF00FFULL; /* four numbers below 100, 16 bits apart */
    pairs = pairs * 100 + (pairs >> 16);        /* 32 bits apart: two numbers below 10^4 */
    pairs &= 0x0000FFFF0000FFFFULL;
    return (pairs & 0xFFFFFFFFULL) * 10000 + (pairs >> 32);
}
#else
#define EIGHT_AT_ONCE 0
#endif

/* Digits at s (up to `end`) appended to w, at most `room` of them: returns how many were taken. */
static inline int take_digits(const unsigned char *s, const unsigned char *end, uint64_t *w, int room) {
    int taken = 0;
#if EIGHT_AT_ONCE
    while (room - taken >= 8 && end - s >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        if (!eight_digits(v)) break;
        *w = *w * 100000000ULL + eight_digit_value(v);
        s += 8;
        taken += 8;
    }
#endif
    while (taken < room && s < end && (unsigned)(*s - '0') < 10) {
        *w = *w * 10 + (uint64_t)(*s - '0');
        s++;
        taken++;
    }
    return taken;
}

/* A number in a list: checked by the JSON grammar and converted in the same pass over its digits, as
 * number_value would convert it (whose slower steps it falls back on). 0 to decline. */
static int read_list_number(Cursor *c, double *out) {
    const unsigned char *s = c->s, *end = c->end, *start = s;
    int negative = 0;
    if (s < end && *s == '-') {
        negative = 1;
        s++;
    }
    if (s >= end) return 0;
    uint64_t w = 0;
    int digits = 0, fraction = 0, integer = 1, exact = 1; /* digits: significant digits in w */
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        int n = take_digits(s, end, &w, 19);
        s += n;
        digits = n;
        if (s < end && (unsigned)(*s - '0') < 10) {
            exact = 0;
            while (s < end && (unsigned)(*s - '0') < 10) s++;
        }
    } else {
        return 0;
    }
    if (s < end && *s == '.') {
        integer = 0;
        s++;
        const unsigned char *first = s;
        if (w == 0)
            while (s < end && *s == '0') s++; /* leading zeros of a fraction are not significant */
        if (exact) {
            int n = take_digits(s, end, &w, 19 - digits);
            s += n;
            digits += n;
        }
        if (s < end && (unsigned)(*s - '0') < 10) {
            exact = 0;
            while (s < end && (unsigned)(*s - '0') < 10) s++;
        }
        if (s == first) return 0;
        fraction = (int)(s - first);
    }
    int exponent = 0;
    if (s < end && (*s == 'e' || *s == 'E')) {
        integer = 0;
        s++;
        int minus = 0;
        if (s < end && (*s == '+' || *s == '-')) minus = (*s++ == '-');
        if (s >= end || (unsigned)(*s - '0') >= 10) return 0;
        for (; s < end && (unsigned)(*s - '0') < 10; s++) {
            if (exponent <= 10000) exponent = exponent * 10 + (*s - '0');
            else exact = 0;
        }
        if (minus) exponent = -exponent;
    }
    c->s = s;
    Py_ssize_t length = s - start;
    if (integer) return number_value(start, length, 1, out);
    double value;
    if (!exact || !exact_value(w, exponent - fraction, &value)) return dtoa_value(start, length, out);
    *out = negative ? -value : value;
    return 1;
}

static int skip_literal(Cursor *c, const char *word, size_t size) {
    if ((size_t)(c->end - c->s) < size || memcmp(c->s, word, size) != 0) return 0;
    c->s += size;
    return 1;
}

static int skip_value(Cursor *c, int depth);

/* A container's element (or an object member's value) and what follows it: 1 when a comma follows (another
 * element), 2 when `close` ends the container, 0 for anything else. Shared by arrays and objects. */
static int skip_element(Cursor *c, int depth, unsigned char close) {
    skip_space(c);
    if (!skip_value(c, depth + 1)) return 0;
    skip_space(c);
    if (c->s >= c->end) return 0;
    if (*c->s == ',') {
        c->s++;
        return 1;
    }
    if (*c->s == close) {
        c->s++;
        return 2;
    }
    return 0;
}

/* Past a container's opening bracket and the space after it; 1 when `close` follows at once (empty). */
static int open_empty(Cursor *c, unsigned char close) {
    c->s++;
    skip_space(c);
    if (c->s < c->end && *c->s == close) {
        c->s++;
        return 1;
    }
    return 0;
}

/* Any JSON value, validated and skipped. */
static int skip_value(Cursor *c, int depth) {
    if (c->s >= c->end) return 0;
    unsigned char ch = *c->s;
    if (ch == '"') {
        const unsigned char *start;
        Py_ssize_t length;
        int escaped;
        return read_string(c, &start, &length, &escaped);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        /* Converted too: orjson refuses a number that overflows a double anywhere in the line. */
        const unsigned char *start;
        Py_ssize_t length;
        int integer;
        double value;
        if (!scan_number(c, &start, &length, &integer)) return 0;
        if (integer) return length - (*start == '-') <= MAX_FINITE_INT_DIGITS; /* any such int is a finite double */
        return number_value(start, length, 0, &value);
    }
    if (ch == 't') return skip_literal(c, "true", 4);
    if (ch == 'f') return skip_literal(c, "false", 5);
    if (ch == 'n') return skip_literal(c, "null", 4);
    if (depth >= MAX_DEPTH) return 0;
    if (ch == '[') {
        if (open_empty(c, ']')) return 1;
        for (;;) {
            int next = skip_element(c, depth, ']');
            if (next != 1) return next == 2;
        }
    }
    if (ch == '{') {
        if (open_empty(c, '}')) return 1;
        for (;;) {
            skip_space(c);
            if (c->s >= c->end || *c->s != '"') return 0;
            const unsigned char *start;
            Py_ssize_t length;
            int escaped;
            if (!read_string(c, &start, &length, &escaped)) return 0;
            skip_space(c);
            if (c->s >= c->end || *c->s != ':') return 0;
            c->s++;
            int next = skip_element(c, depth, '}');
            if (next != 1) return next == 2;
        }
    }
    return 0;
}

/* What a list key holds (parse_block's `kinds`, one byte per key): the standard (p, q, r) lists are KIND_UNIT,
 * KIND_Q, KIND_UNIT; the other rules' lists (docs/rules.md) any number (their ranges are checked by the caller),
 * a residual whose elements may be null (stored as NaN: JSON has no NaN, so NaN stands for null alone), token
 * ids (whole numbers >= 0 of at most 15 digits, stored exactly as doubles), or a probability list the rule may
 * carry and does not use (absent or null; or a list, held to KIND_UNIT and the drafted length, as the exact path
 * holds sample-match's optional p: docs/rules.md). */
enum { KIND_UNIT = 0, KIND_Q = 1, KIND_NUMBER = 2, KIND_NULLABLE = 3, KIND_TOKEN = 4, KIND_SKIPPED = 5 };
#define MAX_LISTS 8
#define MAX_TOKEN_DIGITS 15

/* A token id: digits only (no sign, fraction or exponent: orjson's int), at most MAX_TOKEN_DIGITS. */
static int read_token(Cursor *c, double *out) {
    const unsigned char *s = c->s, *end = c->end;
    if (s >= end || (unsigned)(*s - '0') >= 10) return 0;
    if (*s == '0' && s + 1 < end && (unsigned)(s[1] - '0') < 10) return 0; /* a leading zero: not JSON */
    uint64_t w = 0;
    int digits = 0;
    while (s < end && (unsigned)(*s - '0') < 10) {
        if (++digits > MAX_TOKEN_DIGITS) return 0;
        w = w * 10 + (uint64_t)(*s++ - '0');
    }
    if (s < end && (*s == '.' || *s == 'e' || *s == 'E')) return 0;
    c->s = s;
    *out = (double)w; /* below 2^53: exact */
    return 1;
}

/* A list of `kind` into `buffer`, its length in *count; 0 to decline, also for a KIND_UNIT or KIND_Q value out of
 * its range (q: (0, 1]; p and r: [0, 1]), which the exact path reports: the caller needs no checks of its own. */
static int read_kind_list(Cursor *c, Doubles *buffer, Py_ssize_t *count, int *failed, int kind) {
    *count = 0;
    if (c->s >= c->end || *c->s != '[') return 0;
    c->s++;
    skip_space(c);
    if (c->s < c->end && *c->s == ']') {
        c->s++;
        return 1;
    }
    for (;;) {
        skip_space(c);
        double value;
        if (kind == KIND_TOKEN) {
            if (!read_token(c, &value)) return 0;
        } else if (kind == KIND_NULLABLE && skip_literal(c, "null", 4)) {
            value = NAN;
        } else if (!read_list_number(c, &value)) {
            return 0;
        } else if (kind == KIND_Q ? !(value > 0.0 && value <= 1.0) : kind == KIND_UNIT && !(value >= 0.0 && value <= 1.0)) {
            return 0;
        }
        if (doubles_push(buffer, value) < 0) {
            *failed = 1;
            return 0;
        }
        (*count)++;
        skip_space(c);
        if (c->s >= c->end) return 0;
        if (*c->s == ',') {
            c->s++;
            continue;
        }
        if (*c->s == ']') {
            c->s++;
            return 1;
        }
        return 0;
    }
}

/* An extra field's value as orjson gives it (str, int, float, bool, None); NULL to decline (or on error). */
static PyObject *read_scalar(Cursor *c) {
    if (c->s >= c->end) return NULL;
    unsigned char ch = *c->s;
    if (ch == '"') {
        const unsigned char *start;
        Py_ssize_t length;
        int escaped;
        if (!read_string(c, &start, &length, &escaped) || escaped) return NULL;
        return PyUnicode_DecodeUTF8((const char *)start, length, "strict");
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        const unsigned char *start;
        Py_ssize_t length;
        int integer;
        if (!scan_number(c, &start, &length, &integer)) return NULL;
        if (integer) {
            const unsigned char *s = start;
            int negative = (*s == '-');
            if (negative) s++;
            if (length - negative > MAX_INT_DIGITS) return NULL;
            long long value = 0;
            for (Py_ssize_t i = 0; i < length - negative; i++) value = value * 10 + (s[i] - '0');
            return PyLong_FromLongLong(negative ? -value : value);
        }
        double value;
        if (!number_value(start, length, 0, &value)) return NULL;
        return PyFloat_FromDouble(value);
    }
    if (skip_literal(c, "true", 4)) Py_RETURN_TRUE;
    if (skip_literal(c, "false", 5)) Py_RETURN_FALSE;
    if (skip_literal(c, "null", 4)) Py_RETURN_NONE;
    return NULL; /* a list or an object: the exact path keeps it as it is */
}

typedef struct {
    const char *name;
    Py_ssize_t size;
} Key;

static int key_index(const unsigned char *start, Py_ssize_t length, Key *keys, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the first byte before memcmp: most keys are one byte, and most comparisons fail there */
        if (keys[i].size == length && (length == 0 || ((unsigned char)keys[i].name[0] == start[0] &&
                                                       (length == 1 || memcmp(keys[i].name + 1, start + 1,
                                                                              (size_t)length - 1) == 0))))
            return (int)i;
    }
    return -1;
}

static PyObject *parse_block(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer text;
    PyObject *keys_tuple, *extra_tuple, *missing;
    Py_ssize_t max_line_bytes;
    const char *rule_key = RULE_KEY;
    Py_ssize_t rule_key_size = RULE_KEY_SIZE;
    const char *kinds = "\x00\x01\x00"; /* p, q, r */
    Py_ssize_t kinds_size = 3, bonus = -1;
    if (!PyArg_ParseTuple(args, "y*O!O!nO|y#y#n", &text, &PyTuple_Type, &keys_tuple, &PyTuple_Type, &extra_tuple,
                          &max_line_bytes, &missing, &rule_key, &rule_key_size, &kinds, &kinds_size, &bonus))
        return NULL;
    PyObject *result = NULL, *extras = NULL;
    Doubles lists[MAX_LISTS];
    memset(lists, 0, sizeof(lists));
    int64_t *lengths = NULL;
    Py_ssize_t list_count = PyTuple_GET_SIZE(keys_tuple);
    Py_ssize_t extra_count = PyTuple_GET_SIZE(extra_tuple), key_count = list_count + extra_count;
    Key *keys = NULL;
    PyObject **row_values = NULL;
    int failed = 0, declined = 0;

    if (list_count < 1 || list_count > MAX_LISTS || kinds_size != list_count || bonus >= list_count) {
        PyErr_SetString(PyExc_ValueError, "keys: one to eight list keys, and one kind for each");
        PyBuffer_Release(&text);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < list_count; i++) {
        if ((unsigned char)kinds[i] > KIND_SKIPPED || (i == 0 && kinds[i] == KIND_SKIPPED)) {
            PyErr_SetString(PyExc_ValueError, "kinds: 0 to 5, and the first key's not 5 (its lengths are the rows')");
            PyBuffer_Release(&text);
            return NULL;
        }
    }
    keys = (Key *)PyMem_Calloc((size_t)key_count, sizeof(Key));
    row_values = (PyObject **)PyMem_Calloc((size_t)(extra_count ? extra_count : 1), sizeof(PyObject *));
    extras = PyList_New(extra_count);
    if (keys == NULL || row_values == NULL || extras == NULL) {
        failed = 1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < key_count; i++) {
        PyObject *key = i < list_count ? PyTuple_GET_ITEM(keys_tuple, i) : PyTuple_GET_ITEM(extra_tuple, i - list_count);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            goto done;
        }
        keys[i].name = PyBytes_AS_STRING(key);
        keys[i].size = PyBytes_GET_SIZE(key);
    }
    for (Py_ssize_t i = 0; i < extra_count; i++) {
        PyObject *column = PyList_New(0);
        if (column == NULL) {
            failed = 1;
            goto done;
        }
        PyList_SET_ITEM(extras, i, column);
    }

    const unsigned char *block = (const unsigned char *)text.buf, *block_end = block + text.len;
    if (text.len == 0 || (text.len >= 3 && block[0] == 0xEF && block[1] == 0xBB && block[2] == 0xBF)) {
        declined = 1;
        goto done;
    }
    /* Rows are read up to the end of the block, not of a line: no whitespace, string or number this reader
     * takes holds a newline, so a row's object must end just before one (or at the block's end), and a
     * newline anywhere else is a grammar error here. One pass over the bytes, no search for newlines. */
    Py_ssize_t lines = 0, capacity = text.len / 64 + 16;
    lengths = (int64_t *)PyMem_Malloc((size_t)capacity * sizeof(int64_t));
    if (lengths == NULL) {
        failed = 1;
        goto done;
    }

    const unsigned char *line = block;
    for (Py_ssize_t row = 0;; row++) {
        /* One object filling the line: blank, padded and over-long lines are the exact path's to judge. */
        if (line == block_end || line[0] != '{') {
            declined = 1;
            goto done;
        }
        if (row == capacity) {
            capacity *= 2;
            int64_t *grown = (int64_t *)PyMem_Realloc(lengths, (size_t)capacity * sizeof(int64_t));
            if (grown == NULL) {
                failed = 1;
                goto done;
            }
            lengths = grown;
        }
        Cursor c = {line + 1, block_end};
        Py_ssize_t counts[MAX_LISTS];
        for (Py_ssize_t i = 0; i < list_count; i++) counts[i] = -1;
        for (Py_ssize_t i = 0; i < extra_count; i++) row_values[i] = NULL;
        skip_space(&c);
        if (c.s < c.end && *c.s == '}') {
            c.s++;
        } else {
            for (;;) {
                skip_space(&c);
                const unsigned char *start;
                Py_ssize_t length;
                int escaped;
                if (c.s >= c.end || *c.s != '"' || !read_string(&c, &start, &length, &escaped)) {
                    declined = 1;
                    break;
                }
                skip_space(&c);
                if (c.s >= c.end || *c.s != ':') {
                    declined = 1;
                    break;
                }
                c.s++;
                skip_space(&c);
                if (escaped) { /* it might spell one of our keys */
                    declined = 1;
                    break;
                }
                int which = key_index(start, length, keys, key_count);
                if (which < 0 && rule_key_size > 0 && length == rule_key_size &&
                    memcmp(start, rule_key, (size_t)rule_key_size) == 0) {
                    declined = 1; /* a row naming its rule: jsonl_fast checks it is `standard` (docs/rules.md) */
                    break;
                }
                if (which >= 0 && which < list_count) {
                    int kind = (unsigned char)kinds[which];
                    if (counts[which] != -1) { /* a key given twice (-2: a null given before) */
                        declined = 1;
                        break;
                    }
                    if (kind == KIND_SKIPPED) { /* null (-2), or a list checked as KIND_UNIT */
                        if (skip_literal(&c, "null", 4)) {
                            counts[which] = -2;
                        } else if (!read_kind_list(&c, &lists[which], &counts[which], &failed, KIND_UNIT)) {
                            declined = 1;
                            break;
                        }
                    } else if (!read_kind_list(&c, &lists[which], &counts[which], &failed, kind)) {
                        declined = 1;
                        break;
                    }
                } else if (which >= list_count) {
                    if (row_values[which - list_count] != NULL) {
                        declined = 1;
                        break;
                    }
                    PyObject *value = read_scalar(&c);
                    if (value == NULL) {
                        if (PyErr_Occurred()) {
                            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) failed = 1;
                            else PyErr_Clear();
                        }
                        declined = 1;
                        break;
                    }
                    row_values[which - list_count] = value;
                } else if (!skip_value(&c, 1)) {
                    declined = 1;
                    break;
                }
                skip_space(&c);
                if (c.s < c.end && *c.s == ',') {
                    c.s++;
                    continue;
                }
                if (c.s < c.end && *c.s == '}') {
                    c.s++;
                    break;
                }
                declined = 1;
                break;
            }
        }
        /* the object ends its line: a newline or the block's end next, and the line not over-long */
        if (!declined && ((c.s != block_end && *c.s != '\n') || c.s - line > max_line_bytes)) declined = 1;
        for (Py_ssize_t i = 0; i < list_count && !declined; i++) {
            if ((unsigned char)kinds[i] == KIND_SKIPPED) { /* absent or null, or as long as the draft */
                if (counts[i] >= 0 && counts[i] != counts[0]) declined = 1;
                continue;
            }
            if (counts[i] < 0) {
                declined = 1; /* a list key the row lacks */
            } else if (i == bonus && counts[i] == counts[0] + 1) {
                lists[i].size--; /* the bonus position's token: not drafted */
            } else if (counts[i] != counts[0]) {
                declined = 1;
            }
        }
        for (Py_ssize_t i = 0; i < extra_count; i++) {
            PyObject *value = row_values[i];
            if (!declined && !failed) {
                PyObject *column = PyList_GET_ITEM(extras, i);
                if (PyList_Append(column, value != NULL ? value : missing) < 0) failed = 1;
            }
            Py_XDECREF(value);
            row_values[i] = NULL;
        }
        if (declined || failed) goto done;
        lengths[row] = counts[0];
        lines = row + 1;
        if (c.s == block_end) break;
        line = c.s + 1;
    }

    /* (each list's values, ..., lengths, extras): (p, q, r, lengths, extras) for the standard keys */
    result = PyTuple_New(list_count + 2);
    if (result == NULL) {
        failed = 1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < list_count; i++) {
        PyObject *values =
            PyByteArray_FromStringAndSize((const char *)lists[i].data, lists[i].size * (Py_ssize_t)sizeof(double));
        if (values == NULL) {
            failed = 1;
            goto done;
        }
        PyTuple_SET_ITEM(result, i, values);
    }
    {
        PyObject *sizes = PyByteArray_FromStringAndSize((const char *)lengths, lines * (Py_ssize_t)sizeof(int64_t));
        if (sizes == NULL) {
            failed = 1;
            goto done;
        }
        PyTuple_SET_ITEM(result, list_count, sizes);
        Py_INCREF(extras);
        PyTuple_SET_ITEM(result, list_count + 1, extras);
    }

done:
    for (int i = 0; i < MAX_LISTS; i++) PyMem_Free(lists[i].data);
    PyMem_Free(lengths);
    PyMem_Free(keys);
    PyMem_Free(row_values);
    Py_XDECREF(extras);
    PyBuffer_Release(&text);
    if (failed) {
        Py_XDECREF(result);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    if (PyErr_Occurred()) {
        Py_XDECREF(result);
        return NULL;
    }
    if (declined || result == NULL) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    return result;
}

/* The decimal digits of value (>= 0) at out; returns the byte after them. */
static char *put_count(char *out, int64_t value) {
    char digits[24];
    int n = 0;
    uint64_t v = (uint64_t)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *out++ = digits[--n];
    return out;
}

/* format_runs(prefix, lines, k, accepted) -> the per-run JSON lines of views.records.JsonlWriter without
 * extra keys: prefix + line + ',"k":' + k + ',"accepted":' + a + ',"emitted":' + (a + 1) + "}\n" per run,
 * the three arrays int64 and of one length, every value at least 0; None when one is not. */
static PyObject *format_runs(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer prefix, lines, k, accepted;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &prefix, &lines, &k, &accepted)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t runs = lines.len / 8;
    if (lines.len % 8 || k.len != lines.len || accepted.len != lines.len) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    const int64_t *line = (const int64_t *)lines.buf, *drafted = (const int64_t *)k.buf, *kept = (const int64_t *)accepted.buf;
    for (Py_ssize_t i = 0; i < runs; i++) {
        if (line[i] < 0 || drafted[i] < 0 || kept[i] < 0 || kept[i] == INT64_MAX) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    static const char K[] = ",\"k\":", ACCEPTED[] = ",\"accepted\":", EMITTED[] = ",\"emitted\":";
    size_t per_run = (size_t)prefix.len + 4 * 20 + sizeof K + sizeof ACCEPTED + sizeof EMITTED + 2;
    if (runs > 0 && per_run > (size_t)PY_SSIZE_T_MAX / (size_t)runs) {
        PyErr_NoMemory();
        goto done;
    }
    char *text = (char *)PyMem_Malloc(per_run * (size_t)(runs ? runs : 1));
    if (text == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    char *out = text;
    for (Py_ssize_t i = 0; i < runs; i++) {
        memcpy(out, prefix.buf, (size_t)prefix.len);
        out = put_count(out + prefix.len, line[i]);
        memcpy(out, K, sizeof K - 1);
        out = put_count(out + sizeof K - 1, drafted[i]);
        memcpy(out, ACCEPTED, sizeof ACCEPTED - 1);
        out = put_count(out + sizeof ACCEPTED - 1, kept[i]);
        memcpy(out, EMITTED, sizeof EMITTED - 1);
        out = put_count(out + sizeof EMITTED - 1, kept[i] + 1);
        *out++ = '}';
        *out++ = '\n';
    }
    result = PyBytes_FromStringAndSize(text, out - text);
    PyMem_Free(text);
done:
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&lines);
    PyBuffer_Release(&k);
    PyBuffer_Release(&accepted);
    return result;
}

/* count_newlines(buffer) -> the number of b"\n" bytes in it. */
static PyObject *count_newlines(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *at = (const unsigned char *)text.buf, *end = at + text.len;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    while ((at = memchr(at, '\n', (size_t)(end - at))) != NULL) {
        count++;
        at++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&text);
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"count_newlines", count_newlines, METH_O, "count_newlines(buffer) -> how many newline bytes it holds"},
    {"format_runs", format_runs, METH_VARARGS,
     "format_runs(prefix, lines, k, accepted) -> the per-run JSON lines (int64 arrays), or None"},
    {"parse_block", parse_block, METH_VARARGS,
     "parse_block(text, keys, extra_keys, max_line_bytes, missing[, rule_key, kinds, bonus]) -> "
     "(each list's doubles, ..., lengths, extras) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jsonl_c", "A strict block reader for JSONL runs.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jsonl_c(void) { return PyModule_Create(&module); }
