/* The compiled decode of image columns: stored diagonals to interleaved uint8 pixels, one
 * block at a time in cache (tessera.images.kernel calls it; the numpy decode in
 * tessera.images.decode is the reference it is checked against).
 *
 * Per block and plane: the block's stored coefficients of diagonals 0..k-1 are read in
 * place from each diagonal's array (or from one array holding them all), gathered into the
 * kept r x r corner (a zero where no kept diagonal reaches), widened to float32 and
 * dequantized, colour-converted where the planes' corners agree (YCbCr -> RGB is
 * linear), inverse-transformed along columns and then rows with even/odd butterflies (the
 * m-point DCT matrix's symmetry D[k][M-1-n] = +-D[k][n] applied level by level: 342
 * multiply-adds per 32 outputs instead of 1024), colour-converted on the pixels where the
 * corners differ (4:2:0 beyond the chroma corner), scaled, level-shifted, rounded half to
 * even, clipped and written channel-interleaved into the output. The lane loops run over
 * a compile-time width, so the compiler keeps them in vector registers; the function is
 * compiled for AVX-512, AVX2 and baseline x86-64 and the loader picks the best the CPU
 * has. The float arithmetic differs from the numpy decode's matrix products in order and
 * contraction only: pixels differ by at most one level, rarely (the tests measure it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define MAXM 64 /* the largest block (and output edge) of the format */
#define MAXPARTS 127 /* one part per diagonal: 2 * MAXM - 1 */

static const int16_t zeros[1] = {0};

#if defined(__linux__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* One output pair of a butterfly level: lo = E + O, hi (mirrored) = E - O. */
#define BUTTERFLY(N, A)                                                                     \
    {                                                                                       \
        const float *en = e + (size_t)(N) * LN;                                             \
        float *lo = out + (size_t)(N) * LN, *hi = out + (size_t)(2 * h - 1 - (N)) * LN;     \
        for (int l = 0; l < LN; l++) {                                                      \
            lo[l] = en[l] + A[l];                                                           \
            hi[l] = en[l] - A[l];                                                           \
        }                                                                                   \
    }

/* Y (m rows x L lanes) = the m-point inverse DCT along the rows of X (rows 0..r-1 of L
 * lanes; rows r.. are zero), D[k * m + n] the DCT matrix, buf 2 * MAXM * MAXM floats.
 * Level lev holds the even part E_lev (frequencies k = 0 mod 2^lev) at m >> lev outputs;
 * E_lev[n] = E_{lev+1}[n] + O_lev[n] and E_lev[M-1-n] = E_{lev+1}[n] - O_lev[n], O_lev the
 * sum over k = 2^lev mod 2^(lev+1). Four outputs are summed at once (independent
 * accumulators: the multiply-adds do not wait on each other). */
#define IDCT_COLS(L)                                                                        \
    static inline __attribute__((always_inline)) void idct_cols_##L(                        \
        const float *restrict X, int r, float *restrict Y, const float *restrict D, int m,  \
        float *restrict buf)                                                                \
    {                                                                                       \
        enum { LN = L };                                                                    \
        float *e = buf, *f = buf + MAXM * MAXM + 16 * 5;                                             \
        int s = 0;                                                                          \
        while ((1 << s) < m)                                                                \
            s++;                                                                            \
        for (int l = 0; l < LN; l++)                                                        \
            e[l] = D[0] * X[l];                                                             \
        for (int lev = s - 1; lev >= 0; lev--) {                                            \
            int h = m >> (lev + 1), step = 1 << lev, n = 0;                                 \
            float *out = lev == 0 ? Y : f;                                                  \
            for (; n + 4 <= h; n += 4) {                                                    \
                float a0[LN], a1[LN], a2[LN], a3[LN];                                       \
                for (int l = 0; l < LN; l++)                                                \
                    a0[l] = a1[l] = a2[l] = a3[l] = 0.0f;                                   \
                for (int k = step; k < r; k += 2 * step) {                                  \
                    const float *w = D + k * m + n, *x = X + (size_t)k * LN;                \
                    float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                       \
                    for (int l = 0; l < LN; l++) {                                          \
                        float v = x[l];                                                     \
                        a0[l] += w0 * v;                                                    \
                        a1[l] += w1 * v;                                                    \
                        a2[l] += w2 * v;                                                    \
                        a3[l] += w3 * v;                                                    \
                    }                                                                       \
                }                                                                           \
                BUTTERFLY(n, a0) BUTTERFLY(n + 1, a1) BUTTERFLY(n + 2, a2)                  \
                BUTTERFLY(n + 3, a3)                                                        \
            }                                                                               \
            for (; n < h; n++) {                                                            \
                float acc[LN];                                                              \
                for (int l = 0; l < LN; l++)                                                \
                    acc[l] = 0.0f;                                                          \
                for (int k = step; k < r; k += 2 * step) {                                  \
                    const float w = D[k * m + n], *x = X + (size_t)k * LN;                  \
                    for (int l = 0; l < LN; l++)                                            \
                        acc[l] += w * x[l];                                                 \
                }                                                                           \
                BUTTERFLY(n, acc)                                                           \
            }                                                                               \
            if (lev) {                                                                      \
                float *t = e;                                                               \
                e = f;                                                                      \
                f = t;                                                                      \
            }                                                                               \
        }                                                                                   \
        if (s == 0)                                                                         \
            for (int l = 0; l < LN; l++)                                                    \
                Y[l] = e[l];                                                                \
    }

IDCT_COLS(1)
IDCT_COLS(2)
IDCT_COLS(4)
IDCT_COLS(8)
IDCT_COLS(16)
IDCT_COLS(32)
IDCT_COLS(64)

static inline __attribute__((always_inline)) void idct_cols(
    const float *restrict X, int r, int L, float *restrict Y, const float *restrict D, int m,
    float *restrict buf)
{
    switch (L) {
    case 1: idct_cols_1(X, r, Y, D, m, buf); break;
    case 2: idct_cols_2(X, r, Y, D, m, buf); break;
    case 4: idct_cols_4(X, r, Y, D, m, buf); break;
    case 8: idct_cols_8(X, r, Y, D, m, buf); break;
    case 16: idct_cols_16(X, r, Y, D, m, buf); break;
    case 32: idct_cols_32(X, r, Y, D, m, buf); break;
    default: idct_cols_64(X, r, Y, D, m, buf); break;
    }
}

/* U (L rows x m lanes) = T (m rows x L lanes) transposed. 8 x 8 tiles are moved in
 * vector registers where the compiler has vector shuffles (three stages of pairwise
 * interleaves); elsewhere, and for edges below 8, one value at a time. */
#if defined(__GNUC__) && !defined(__clang__)
typedef float v8sf __attribute__((vector_size(32), aligned(4)));
typedef int v8si __attribute__((vector_size(32)));
#define SHUF(a, b, ...) __builtin_shuffle(a, b, (v8si){__VA_ARGS__})
static inline __attribute__((always_inline)) void tile8(const float *T, int ts, float *U,
                                                        int us)
{
    v8sf r0 = *(const v8sf *)(T), r1 = *(const v8sf *)(T + ts);
    v8sf r2 = *(const v8sf *)(T + 2 * ts), r3 = *(const v8sf *)(T + 3 * ts);
    v8sf r4 = *(const v8sf *)(T + 4 * ts), r5 = *(const v8sf *)(T + 5 * ts);
    v8sf r6 = *(const v8sf *)(T + 6 * ts), r7 = *(const v8sf *)(T + 7 * ts);
    v8sf t0 = SHUF(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13), t1 = SHUF(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t2 = SHUF(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13), t3 = SHUF(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t4 = SHUF(r4, r5, 0, 8, 1, 9, 4, 12, 5, 13), t5 = SHUF(r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t6 = SHUF(r6, r7, 0, 8, 1, 9, 4, 12, 5, 13), t7 = SHUF(r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf u0 = SHUF(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13), u1 = SHUF(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u2 = SHUF(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13), u3 = SHUF(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u4 = SHUF(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13), u5 = SHUF(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u6 = SHUF(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13), u7 = SHUF(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    *(v8sf *)(U) = SHUF(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11);
    *(v8sf *)(U + us) = SHUF(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11);
    *(v8sf *)(U + 2 * us) = SHUF(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11);
    *(v8sf *)(U + 3 * us) = SHUF(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11);
    *(v8sf *)(U + 4 * us) = SHUF(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15);
    *(v8sf *)(U + 5 * us) = SHUF(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15);
    *(v8sf *)(U + 6 * us) = SHUF(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15);
    *(v8sf *)(U + 7 * us) = SHUF(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15);
}
#define HAVE_TILE8 1
#endif

static inline __attribute__((always_inline)) void transpose(const float *restrict T, int m,
                                                            int L, float *restrict U)
{
#ifdef HAVE_TILE8
    if (m % 8 == 0 && L % 8 == 0) {
        for (int i = 0; i < L; i += 8)
            for (int x = 0; x < m; x += 8)
                tile8(T + (size_t)x * L + i, L, U + (size_t)i * m + x, m);
        return;
    }
#endif
    for (int i = 0; i < L; i++)
        for (int x = 0; x < m; x++)
            U[(size_t)i * m + x] = T[(size_t)x * L + i];
}

/* The lane width of a corner of r rows: the next power of two (the format's edges are). */
static inline int lanes(int r)
{
    int L = 1;
    while (L < r)
        L <<= 1;
    return L;
}

static inline __attribute__((always_inline)) void mix3(float *a, float *b, float *c, int n,
                                                       const float *M)
{
    for (int i = 0; i < n; i++) {
        float y = a[i], u = b[i], v = c[i];
        a[i] = M[0] * y + M[1] * u + M[2] * v;
        b[i] = M[3] * y + M[4] * u + M[5] * v;
        c[i] = M[6] * y + M[7] * u + M[8] * v;
    }
}

typedef struct {
    int parts;            /* source arrays: one per diagonal, or one holding them all */
    const void **part;    /* each (N, C, BY, BX, width[i]) contiguous, int8 or int16 */
    const int *width;     /* coefficients per block of each part */
    int elem;             /* 1: int8, 2: int16 */
    int C, BY, BX;        /* stored channels, blocks */
    int P;                /* output planes: 1 or 3 */
    int chan[3], r[3];    /* each plane's stored channel and corner edge */
    const int *part_of[3], *offset[3]; /* each plane's gather, r x r, column-major (entry
                           * j * r + i: the corner's row i, column j): which part (parts:
                           * the zero slot) and which coefficient of the block in it */
    float q;              /* quantization step */
    int mix;              /* 0: none; 1: colour on coefficients; 2: on pixels */
    const float *M;       /* YCbCr -> RGB, row-major 3 x 3 */
    const float *D;       /* the m-point DCT matrix, m x m */
    int m;                /* output block edge */
    int scaled;           /* multiply by factor (m != block) */
    float factor, level;
    uint8_t *out;         /* (N, BY*m, BX*m, P) */
} job_t;

/* Each part's coefficients of one block of stored channel ch: ptr[p] (bytes), and
 * ptr[parts] the zero slot. */
static inline __attribute__((always_inline)) void block_ptrs(const job_t *j, size_t n, int ch,
                                                            int by, int bx, const char **ptr)
{
    size_t blk = (((size_t)n * j->C + ch) * j->BY + by) * j->BX + bx;
    for (int p = 0; p < j->parts; p++) {
        size_t w = (size_t)j->width[p] * (size_t)j->elem;
        ptr[p] = (const char *)j->part[p] + blk * w;
        __builtin_prefetch(ptr[p] + 4 * w); /* four blocks ahead: the parts are many streams */
    }
    ptr[j->parts] = (const char *)zeros;
}

/* The r x r corner of one plane, dequantized, transposed into rows of L lanes (row jj holds
 * the corner's column jj; lanes r.. zero): entry jj * r + i of the tables says which part
 * and which coefficient of it the corner's (i, jj) is. */
#define GATHER(TYPE)                                                                        \
    {                                                                                       \
        TYPE *g = (TYPE *)raw;                                                              \
        for (int e = 0; e < rp * rp; e++) /* the bytes first: loads and stores only */      \
            g[e] = ((const TYPE *)ptr[pt[e]])[of[e]];                                       \
        for (int jj = 0; jj < rp; jj++) { /* then widened and scaled, in vectors */         \
            float *row = c + (size_t)jj * Lp;                                               \
            const TYPE *gj = g + (size_t)jj * rp;                                           \
            for (int i = 0; i < rp; i++)                                                    \
                row[i] = (float)gj[i] * q;                                                  \
            for (int i = rp; i < Lp; i++)                                                   \
                row[i] = 0.0f;                                                              \
        }                                                                                   \
    }

CLONES
static int decode_range(const job_t *j, Py_ssize_t n0, Py_ssize_t n1)
{
    const int m = j->m, P = j->P, mm = m * m;
    /* ten work areas, each one cache line and a bit past the last (loads of one and stores
     * to another that agree in their address's low 12 bits wait on each other) */
    const size_t AREA = (size_t)MAXM * MAXM + 16 * 5;
    float *mem = malloc(sizeof(float) * AREA * 10);
    if (!mem)
        return -1;
    float *cf[3], *px[3];
    const char *ptr[MAXPARTS + 1];
    int16_t raw[MAXM * MAXM];
    for (int p = 0; p < 3; p++) {
        cf[p] = mem + (size_t)p * AREA;
        px[p] = mem + (size_t)(3 + p) * AREA;
    }
    float *T = mem + (size_t)6 * AREA, *U = mem + (size_t)7 * AREA;
    float *buf = mem + (size_t)8 * AREA;
    const size_t W = (size_t)j->BX * m, H = (size_t)j->BY * m;
    const int shared = P > 1 && j->chan[0] == j->chan[1] && j->chan[1] == j->chan[2];
    for (Py_ssize_t n = n0; n < n1; n++)
        for (int by = 0; by < j->BY; by++)
            for (int bx = 0; bx < j->BX; bx++) {
                for (int p = 0; p < P; p++) {
                    if (!shared || p == 0)
                        block_ptrs(j, (size_t)n, j->chan[p], by, bx, ptr);
                    const int rp = j->r[p], Lp = lanes(rp);
                    const int *pt = j->part_of[p], *of = j->offset[p];
                    const float q = j->q;
                    float *c = cf[p];
                    if (j->elem == 1)
                        GATHER(int8_t)
                    else
                        GATHER(int16_t)
                }
                if (j->mix == 1)
                    mix3(cf[0], cf[1], cf[2], j->r[0] * lanes(j->r[0]), j->M);
                for (int p = 0; p < P; p++) {
                    const int rp = j->r[p], Lp = lanes(rp);
                    idct_cols(cf[p], rp, Lp, T, j->D, m, buf); /* T[x][i] */
                    transpose(T, m, Lp, U);
                    idct_cols(U, rp, m, px[p], j->D, m, buf); /* px[y][x] */
                }
                if (j->mix == 2)
                    mix3(px[0], px[1], px[2], mm, j->M);
                for (int y = 0; y < m; y++) {
                    uint8_t *row = j->out + ((size_t)n * H + (size_t)by * m + y) * W * P
                                   + (size_t)bx * m * P;
                    uint8_t t[3][MAXM];
                    for (int p = 0; p < P; p++) {
                        const float *a = px[p] + (size_t)y * m;
                        uint8_t *tp = t[p];
                        for (int x = 0; x < m; x++) {
                            float v = j->scaled ? a[x] * j->factor : a[x];
                            v = rintf(v + j->level);
                            v = v < 0.0f ? 0.0f : v;
                            v = v > 255.0f ? 255.0f : v;
                            tp[x] = (uint8_t)(int)v;
                        }
                    }
                    if (P == 3)
                        for (int x = 0; x < m; x++) {
                            row[3 * x] = t[0][x];
                            row[3 * x + 1] = t[1][x];
                            row[3 * x + 2] = t[2][x];
                        }
                    else
                        memcpy(row, t[0], (size_t)m);
                }
            }
    free(mem);
    return 0;
}

/* decode_u8(parts, widths, elem, C, BY, BX, chans, rs, part_of, offset, q, mix, M, D, m,
 *           scaled, factor, level, out, n0, n1)
 * The caller (tessera.images.kernel) checks every shape, dtype and index bound. */
static PyObject *decode_u8(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *parts_obj, *widths_obj, *chans_obj, *rs_obj;
    Py_buffer part_of, offset, M, D, out;
    job_t j;
    j.part = NULL;
    Py_ssize_t n0, n1;
    if (!PyArg_ParseTuple(args, "OOiiiiOOy*y*fiy*y*iiffw*nn", &parts_obj, &widths_obj,
                          &j.elem, &j.C, &j.BY, &j.BX, &chans_obj, &rs_obj, &part_of,
                          &offset, &j.q, &j.mix, &M, &D, &j.m, &j.scaled, &j.factor,
                          &j.level, &out, &n0, &n1))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *bufs = NULL;
    int *widths = NULL, got = 0;
    PyObject *parts = PySequence_Fast(parts_obj, "parts must be a sequence");
    PyObject *wseq = parts ? PySequence_Fast(widths_obj, "widths must be a sequence") : NULL;
    PyObject *cseq = wseq ? PySequence_Fast(chans_obj, "chans must be a sequence") : NULL;
    PyObject *rseq = cseq ? PySequence_Fast(rs_obj, "rs must be a sequence") : NULL;
    if (!rseq)
        goto done;
    j.parts = (int)PySequence_Fast_GET_SIZE(parts);
    j.P = (int)PySequence_Fast_GET_SIZE(cseq);
    if (j.parts < 1 || j.parts > MAXPARTS || PySequence_Fast_GET_SIZE(wseq) != j.parts
        || j.P < 1 || j.P > 3 || (j.elem != 1 && j.elem != 2)
        || PySequence_Fast_GET_SIZE(rseq) != j.P || j.m < 1 || j.m > MAXM) {
        PyErr_SetString(PyExc_ValueError, "decode_u8: inconsistent arguments");
        goto done;
    }
    bufs = calloc((size_t)j.parts, sizeof(Py_buffer));
    widths = calloc((size_t)j.parts, sizeof(int));
    j.part = calloc((size_t)j.parts, sizeof(void *));
    if (!bufs || !widths || !j.part) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < j.parts; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(parts, got), &bufs[got],
                               PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        j.part[got] = bufs[got].buf;
        widths[got] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(wseq, got));
    }
    j.width = widths;
    Py_ssize_t rr = 0;
    for (int p = 0; p < j.P; p++) {
        j.chan[p] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(cseq, p));
        j.r[p] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(rseq, p));
        if (j.r[p] < 1 || j.r[p] > j.m) {
            PyErr_SetString(PyExc_ValueError, "decode_u8: corner larger than the block");
            goto done;
        }
        j.part_of[p] = (const int *)part_of.buf + rr;
        j.offset[p] = (const int *)offset.buf + rr;
        rr += (Py_ssize_t)j.r[p] * j.r[p];
    }
    if (PyErr_Occurred())
        goto done;
    if (part_of.len < rr * (Py_ssize_t)sizeof(int) || offset.len < rr * (Py_ssize_t)sizeof(int)
        || M.len < 9 * (Py_ssize_t)sizeof(float)
        || D.len < (Py_ssize_t)j.m * j.m * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "decode_u8: table too short");
        goto done;
    }
    j.M = (const float *)M.buf;
    j.D = (const float *)D.buf;
    j.out = (uint8_t *)out.buf;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_range(&j, n0, n1);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&bufs[i]);
    free(bufs);
    free(widths);
    free((void *)j.part);
    Py_XDECREF(parts);
    Py_XDECREF(wseq);
    Py_XDECREF(cseq);
    Py_XDECREF(rseq);
    PyBuffer_Release(&part_of);
    PyBuffer_Release(&offset);
    PyBuffer_Release(&M);
    PyBuffer_Release(&D);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_u8", decode_u8, METH_VARARGS,
     "Pixels of images n0..n1-1 from stored diagonals (see tessera.images.kernel)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernel",
    "The compiled decode of image columns (tessera.images.kernel wraps it).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    return PyModule_Create(&module);
}
