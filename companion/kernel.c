/* Attention over small maps on one CPU thread: out = softmax(scale * q k^T + bias) v, and its gradients.
 *
 * Built and loaded by companion/kernel.py (its docstring says why this exists and when it is used).
 * Every map (one sample r, one head h) is computed on its own by loops whose order of operations is
 * fixed by this source: no sum is split by the batch, a thread or the machine's vector width, so a
 * map's result does not depend on what else is in the batch (a member of a seed-stacked group
 * computes what it computes alone). Vectors are GCC's generic 8-float vectors (`v8f`), lowered to
 * whatever the target has; every operation on them is lane by lane, with no fused multiply-add
 * (-ffp-contract=off), so a lane computes what the same scalar code would.
 *
 * A map keeps its scores transposed, key-major with 8 queries to a vector (`st[j][c]`, queries
 * c*8 .. c*8+7, the last vector padded with zero queries), so the softmax's maxima and sums over the
 * keys run down columns, one query per lane.
 *
 * Layouts (float32, strides in elements): q (R, H, I, Dk), k (R, H, J, Dk), v (R, H, J, Dv), any
 * strides; out (R, I, H, Dv) contiguous; p, the saved weights, (R, H, J, Ip) contiguous, transposed,
 * Ip = I rounded up to 8; biasT (Mb, Hb, J, Ip) transposed and padded, strides bs0 (member) and bs1
 * (head; 0 when the heads share it); sample r belongs to bias member r / (R / Mb). Causal: query i (at
 * position q_start + i) reads keys j <= q_start + i. Gradients: dq (R, I, H, Dk), dk (R, J, H, Dk),
 * dv (R, J, H, Dv) contiguous; dbiasT like biasT, accumulated sample by sample, head by head, in
 * order (zeroed by the caller).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define W 8
static inline i64 padded(i64 n) { return (n + W - 1) / W * W; }
static inline v8f ld(const float *p) { v8f x; memcpy(&x, p, sizeof x); return x; }
static inline void st8(float *p, v8f x) { memcpy(p, &x, sizeof x); }
static inline v8f splat(float a) { return (v8f){a, a, a, a, a, a, a, a}; }
static inline v8f select8(v8i mask, v8f a, v8f b) { return (v8f)(((v8i)a & mask) | ((v8i)b & ~mask)); }

/* e^x lane by lane for x <= 0: Cody-Waite reduction, Cephes' degree-6 polynomial (about 1 ulp), 0 below
 * the smallest normal float; the rounding to an integer by adding and subtracting 1.5 * 2^23. */
static inline v8f exp_nonpos(v8f x) {
    const v8f lo = splat(-87.33654475f), shift = splat(12582912.0f);
    v8i keep = x >= lo;
    v8f xc = select8(keep, x, lo);
    v8f t = xc * splat(1.44269504088896341f) + shift;
    v8f n = t - shift;
    v8f r = xc - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    v8f p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * (r * r) + r + splat(1.0f);
    v8i ni = (v8i)t - (v8i)shift; /* the integer n, from the bits of t */
    v8f two_n = (v8f)((ni + 127) << 23);
    return select8(keep, p * two_n, splat(0.0f));
}

/* Copies of one map's operands into the buffers: rows (n, width) or transposed (width, n_padded). */
static void load_rows(float *restrict dst, const float *restrict src, i64 n, i64 w, i64 wp, i64 s_row, i64 s_col) {
    for (i64 a = 0; a < n; a++) {
        for (i64 c = 0; c < w; c++) dst[a * wp + c] = src[a * s_row + c * s_col];
        for (i64 c = w; c < wp; c++) dst[a * wp + c] = 0.0f;
    }
}

static void load_cols(float *restrict dst, const float *restrict src, i64 n, i64 np, i64 w, i64 s_row, i64 s_col) {
    for (i64 c = 0; c < w; c++) {
        for (i64 a = 0; a < n; a++) dst[c * np + a] = src[a * s_row + c * s_col];
        for (i64 a = n; a < np; a++) dst[c * np + a] = 0.0f;
    }
}

/* One vector of scores (key j, queries c .. c+7): scaled, biased, hidden where causal, stored. */
static inline void score(float *restrict st, v8f acc, const float *restrict bt, i64 j, i64 c, i64 Ip,
                         v8f vscale, int causal, i64 q_start) {
    const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    acc = acc * vscale;
    if (bt) acc = acc + ld(bt + j * Ip + c);
    if (causal) {
        /* query c + lane sees key j when j <= q_start + c + lane */
        v8i hidden = (lane + (int32_t)(c + q_start)) < (int32_t)j;
        acc = select8(hidden, splat(-INFINITY), acc);
    }
    st8(st + j * Ip + c, acc);
}

/* The keys that any of the queries c .. c+7 sees: all, or with the causal rule those up to the last
 * query's position q_start + c + 7. The weights of the rest are exactly 0 and are not computed. */
static inline i64 visible_keys(i64 J, i64 c, int causal, i64 q_start) {
    if (!causal) return J;
    i64 n = q_start + c + W;
    return n < J ? n : J;
}

/* The first query that sees key j (causal: query i sees j when j <= q_start + i); I when none does. */
static inline i64 first_query(i64 j, i64 I, int causal, i64 q_start) {
    if (!causal || j <= q_start) return 0;
    return j - q_start < I ? j - q_start : I;
}

/* sum_t splat(a[t * sa]) * ld(b + t * sb) over t < n, for four a's at once (a, a + da, a + 2da, a + 3da):
 * four independent sums, each in the order t = 0, 1, ... */
static inline void dot4(v8f out[4], const float *a, i64 da, i64 sa, const float *b, i64 sb, i64 n) {
    v8f a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (i64 t = 0; t < n; t++) {
        const v8f bt = ld(b + t * sb);
        a0 = a0 + splat(a[t * sa]) * bt;
        a1 = a1 + splat(a[da + t * sa]) * bt;
        a2 = a2 + splat(a[2 * da + t * sa]) * bt;
        a3 = a3 + splat(a[3 * da + t * sa]) * bt;
    }
    out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
}

static inline v8f dot1(const float *a, i64 sa, const float *b, i64 sb, i64 n) {
    v8f acc = splat(0.0f);
    for (i64 t = 0; t < n; t++) acc = acc + splat(a[t * sa]) * ld(b + t * sb);
    return acc;
}

/* The weights of one map, transposed: st (J, Ip) = softmax over j of (scale * q_i.k_j + bias), 0 where
 * causal hides key j from query i. qt (Dk, Ip), kr (J, Dk). */
static void map_weights(float *restrict st, const float *restrict qt, const float *restrict kr,
                        const float *restrict bt, float *restrict work, i64 I, i64 J, i64 Dk,
                        float scale, int causal, i64 q_start) {
    const i64 Ip = padded(I);
    const v8f vscale = splat(scale);
    for (i64 c = 0; c < Ip; c += W) {
        const i64 Jc = visible_keys(J, c, causal, q_start); /* keys any of these queries sees */
        /* four keys at a time: four independent sums (a sum's own order is d = 0, 1, ...) */
        i64 j = 0;
        for (; j + 4 <= Jc; j += 4) {
            v8f a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
            const float *k0 = kr + j * Dk;
            for (i64 d = 0; d < Dk; d++) {
                const v8f qd = ld(qt + d * Ip + c);
                a0 = a0 + splat(k0[d]) * qd;
                a1 = a1 + splat(k0[Dk + d]) * qd;
                a2 = a2 + splat(k0[2 * Dk + d]) * qd;
                a3 = a3 + splat(k0[3 * Dk + d]) * qd;
            }
            score(st, a0, bt, j, c, Ip, vscale, causal, q_start);
            score(st, a1, bt, j + 1, c, Ip, vscale, causal, q_start);
            score(st, a2, bt, j + 2, c, Ip, vscale, causal, q_start);
            score(st, a3, bt, j + 3, c, Ip, vscale, causal, q_start);
        }
        for (; j < Jc; j++) {
            v8f acc = splat(0.0f);
            for (i64 d = 0; d < Dk; d++) acc = acc + splat(kr[j * Dk + d]) * ld(qt + d * Ip + c);
            score(st, acc, bt, j, c, Ip, vscale, causal, q_start);
        }
        v8f mx = ld(st + c);
        for (j = 1; j < Jc; j++) {
            v8f s = ld(st + j * Ip + c);
            mx = select8(s > mx, s, mx);
        }
        v8f sum = splat(0.0f);
        for (j = 0; j < Jc; j++) {
            v8f e = exp_nonpos(ld(st + j * Ip + c) - mx);
            sum = sum + e;
            st8(st + j * Ip + c, e);
        }
        v8f inv = splat(1.0f) / sum;
        for (j = 0; j < Jc; j++) st8(st + j * Ip + c, ld(st + j * Ip + c) * inv);
        for (; j < J; j++) st8(st + j * Ip + c, splat(0.0f)); /* keys no query here sees: weight 0 */
    }
    (void)work;
}

int small_attention_forward(const float *q, i64 qs0, i64 qs1, i64 qs2, i64 qs3,
                            const float *k, i64 ks0, i64 ks1, i64 ks2, i64 ks3,
                            const float *v, i64 vs0, i64 vs1, i64 vs2, i64 vs3,
                            const float *biasT, i64 bs0, i64 bs1,
                            i64 R, i64 H, i64 I, i64 J, i64 Dk, i64 Dv, i64 Mb,
                            int causal, i64 q_start, float scale, float *out, float *p) {
    const i64 Ip = padded(I);
    float *buf = aligned_alloc(64, sizeof(float) * (size_t)padded(Dk * Ip + J * Dk + J * Dv + J * Ip + Dv * Ip + W));
    if (!buf) return 1;
    float *qt = buf, *kr = qt + Dk * Ip, *vr = kr + J * Dk, *st = vr + J * Dv, *ot = st + J * Ip;
    const i64 per = Mb > 1 ? R / Mb : R;
    for (i64 r = 0; r < R; r++) {
        const i64 m = Mb > 1 ? r / per : 0;
        for (i64 h = 0; h < H; h++) {
            load_cols(qt, q + r * qs0 + h * qs1, I, Ip, Dk, qs2, qs3);
            load_rows(kr, k + r * ks0 + h * ks1, J, Dk, Dk, ks2, ks3);
            load_rows(vr, v + r * vs0 + h * vs1, J, Dv, Dv, vs2, vs3);
            const float *bt = biasT ? biasT + m * bs0 + h * bs1 : NULL;
            map_weights(st, qt, kr, bt, NULL, I, J, Dk, scale, causal, q_start);
            for (i64 c = 0; c < Ip; c += W) {
                const i64 Jc = visible_keys(J, c, causal, q_start);
                i64 e = 0;
                for (; e + 4 <= Dv; e += 4) {
                    v8f o[4];
                    dot4(o, vr + e, 1, Dv, st + c, Ip, Jc);
                    for (int u = 0; u < 4; u++) st8(ot + (e + u) * Ip + c, o[u]);
                }
                for (; e < Dv; e++) st8(ot + e * Ip + c, dot1(vr + e, Dv, st + c, Ip, Jc));
            }
            float *orow = out + (r * I * H + h) * Dv; /* out[r, i, h, e] */
            for (i64 i = 0; i < I; i++)
                for (i64 e = 0; e < Dv; e++) orow[i * H * Dv + e] = ot[e * Ip + i];
            if (p) memcpy(p + (r * H + h) * J * Ip, st, sizeof(float) * (size_t)(J * Ip));
        }
    }
    free(buf);
    return 0;
}

int small_attention_backward(const float *q, i64 qs0, i64 qs1, i64 qs2, i64 qs3,
                             const float *k, i64 ks0, i64 ks1, i64 ks2, i64 ks3,
                             const float *v, i64 vs0, i64 vs1, i64 vs2, i64 vs3,
                             const float *p, const float *g, i64 gs0, i64 gs1, i64 gs2, i64 gs3,
                             i64 R, i64 H, i64 I, i64 J, i64 Dk, i64 Dv, i64 Mb,
                             int causal, i64 q_start, float scale, float *dq, float *dk, float *dv, float *dbiasT, i64 bs0, i64 bs1) {
    const i64 Ip = padded(I), Dkp = padded(Dk), Dvp = padded(Dv);
    const size_t n = (size_t)(I * Dkp + J * Dk + J * Dv + Dv * Ip + I * Dvp + 2 * J * Ip + Ip + Dk * Ip + J * Dkp + J * Dvp);
    float *buf = aligned_alloc(64, sizeof(float) * (size_t)padded((i64)n + W));
    if (!buf) return 1;
    float *qr = buf, *kr = qr + I * Dkp, *vr = kr + J * Dk, *gt = vr + J * Dv, *gr = gt + Dv * Ip;
    float *dpt = gr + I * Dvp, *dst = dpt + J * Ip, *dd = dst + J * Ip, *dqt = dd + Ip, *dkr = dqt + Dk * Ip;
    float *dvr = dkr + J * Dkp;
    const i64 per = Mb > 1 ? R / Mb : R;
    const v8f vscale = splat(scale);
    for (i64 r = 0; r < R; r++) {
        const i64 m = Mb > 1 ? r / per : 0;
        for (i64 h = 0; h < H; h++) {
            load_rows(qr, q + r * qs0 + h * qs1, I, Dk, Dkp, qs2, qs3);
            load_rows(kr, k + r * ks0 + h * ks1, J, Dk, Dk, ks2, ks3);
            load_rows(vr, v + r * vs0 + h * vs1, J, Dv, Dv, vs2, vs3);
            load_cols(gt, g + r * gs0 + h * gs1, I, Ip, Dv, gs2, gs3);
            load_rows(gr, g + r * gs0 + h * gs1, I, Dv, Dvp, gs2, gs3);
            const float *pt = p + (r * H + h) * J * Ip;
            float *db = dbiasT ? dbiasT + m * bs0 + h * bs1 : NULL;
            for (i64 c = 0; c < Ip; c += W) {
                /* dP^T[j][i] = v_j . dO_i;  D_i = sum_j P_ij dP_ij;  dS = P (dP - D) */
                const i64 Jc = visible_keys(J, c, causal, q_start); /* P and dS are 0 beyond */
                i64 j = 0;
                for (; j + 4 <= Jc; j += 4) {
                    v8f o[4];
                    dot4(o, vr + j * Dv, Dv, 1, gt + c, Ip, Dv);
                    for (int u = 0; u < 4; u++) st8(dpt + (j + u) * Ip + c, o[u]);
                }
                for (; j < Jc; j++) st8(dpt + j * Ip + c, dot1(vr + j * Dv, 1, gt + c, Ip, Dv));
                v8f dsum = splat(0.0f);
                for (j = 0; j < Jc; j++) dsum = dsum + ld(pt + j * Ip + c) * ld(dpt + j * Ip + c);
                for (j = 0; j < Jc; j++) {
                    v8f s = ld(pt + j * Ip + c) * (ld(dpt + j * Ip + c) - dsum);
                    if (db) st8(db + j * Ip + c, ld(db + j * Ip + c) + s);
                    st8(dst + j * Ip + c, s * vscale);
                }
                for (; j < J; j++) st8(dst + j * Ip + c, splat(0.0f));
                /* dQ^T[d][i] = sum_j k_jd (scale dS_ij) */
                i64 d = 0;
                for (; d + 4 <= Dk; d += 4) {
                    v8f o[4];
                    dot4(o, kr + d, 1, Dk, dst + c, Ip, Jc);
                    for (int u = 0; u < 4; u++) st8(dqt + (d + u) * Ip + c, o[u]);
                }
                for (; d < Dk; d++) st8(dqt + d * Ip + c, dot1(kr + d, Dk, dst + c, Ip, Jc));
            }
            /* dK[j] = sum_i (scale dS_ij) q_i;  dV[j] = sum_i P_ij dO_i  (vectors along the channels), from
             * the first query that sees key j (the terms before it are exactly 0, and a sum that starts
             * with +0 is unchanged by them) */
            i64 j = 0;
            for (; j + 4 <= J; j += 4) {
                v8f o[4];
                const i64 i0 = first_query(j, I, causal, q_start);
                for (i64 c = 0; c < Dkp; c += W) {
                    dot4(o, dst + j * Ip + i0, Ip, 1, qr + i0 * Dkp + c, Dkp, I - i0);
                    for (int u = 0; u < 4; u++) st8(dkr + (j + u) * Dkp + c, o[u]);
                }
                for (i64 c = 0; c < Dvp; c += W) {
                    dot4(o, pt + j * Ip + i0, Ip, 1, gr + i0 * Dvp + c, Dvp, I - i0);
                    for (int u = 0; u < 4; u++) st8(dvr + (j + u) * Dvp + c, o[u]);
                }
            }
            for (; j < J; j++) {
                const i64 i0 = first_query(j, I, causal, q_start);
                for (i64 c = 0; c < Dkp; c += W)
                    st8(dkr + j * Dkp + c, dot1(dst + j * Ip + i0, 1, qr + i0 * Dkp + c, Dkp, I - i0));
                for (i64 c = 0; c < Dvp; c += W)
                    st8(dvr + j * Dvp + c, dot1(pt + j * Ip + i0, 1, gr + i0 * Dvp + c, Dvp, I - i0));
            }
            float *qo = dq + (r * I * H + h) * Dk;
            for (i64 i = 0; i < I; i++)
                for (i64 d = 0; d < Dk; d++) qo[i * H * Dk + d] = dqt[d * Ip + i];
            float *ko = dk + (r * J * H + h) * Dk, *vo = dv + (r * J * H + h) * Dv;
            for (i64 j = 0; j < J; j++) {
                memcpy(ko + j * H * Dk, dkr + j * Dkp, sizeof(float) * (size_t)Dk);
                memcpy(vo + j * H * Dv, dvr + j * Dvp, sizeof(float) * (size_t)Dv);
            }
        }
    }
    free(buf);
    return 0;
}
