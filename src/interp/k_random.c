/*
 * k_random.c — the random-number kernels: rng, rng-bit-generator, rng-get-and-update-state.
 *
 * Random numbers are deterministic given the seed (splitmix64 streams); their bits are not
 * XLA's Philox/ThreeFry bits.
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return (double)(next_random(s) >> 11) * 0x1.0p-53; }

/* rng(a, b), distribution=rng_uniform: [a, b); rng_normal: mean a, deviation b. */
static gs_status k_rng(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const char *dist = gs_instr_str(in, GS_ATTR_DISTRIBUTION);
    bool normal = dist && strcmp(dist, "rng_normal") == 0;
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    const gs_value *a = ops[0], *b = ops[1];
    bool is_float = gs_type_is_float(r->type);
    for (int64_t i = 0; i < r->n; i++) {
        if (is_float) {
            double lo = gs_elem_get_f(a->data, a->type, 0), hi = gs_elem_get_f(b->data, b->type, 0);
            double v;
            if (normal) {
                double u1 = uniform01(&ev->rng_state), u2 = uniform01(&ev->rng_state);
                v = lo + hi * sqrt(-2.0 * log(u1 > 0 ? u1 : 0x1.0p-53)) * cos(2 * M_PI * u2);
            } else {
                v = lo + (hi - lo) * uniform01(&ev->rng_state);
                if (v >= hi && hi > lo) v = lo;
            }
            gs_elem_set_f(r->data, r->type, i, v);
        } else {
            int64_t lo = gs_elem_get_i(a->data, a->type, 0), hi = gs_elem_get_i(b->data, b->type, 0);
            uint64_t span = hi > lo ? (uint64_t)hi - (uint64_t)lo : 1;
            gs_elem_set_i(r->data, r->type, i, lo + (int64_t)(next_random(&ev->rng_state) % span));
        }
    }
    *out = r;
    return GS_OK;
}

/* rng-bit-generator(state) -> (new_state, bits): deterministic in the state. */
static gs_status k_rng_bit_generator(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_shape *s = in->shape;
    if (s->type != GS_TUPLE || s->n_tuple != 2) return gs_eval_error(ev, in, "result must be (state, bits)");
    const gs_value *st = ops[0];
    gs_value *ns = gs_value_copy(st);
    gs_value *bits = gs_value_new_array(s->tuple[1]->type, s->tuple[1]->rank, s->tuple[1]->dims);
    if (!ns || !bits) {
        gs_value_free(ns);
        gs_value_free(bits);
        return gs_eval_oom(ev, in);
    }
    uint64_t seed = 0x5851f42d4c957f2dull;
    for (int64_t i = 0; i < st->n; i++) seed = seed * 6364136223846793005ull + (uint64_t)gs_elem_get_i(st->data, st->type, i);
    unsigned char *p = bits->data;
    size_t nbytes = gs_value_bytes(bits);
    uint64_t g = seed;
    for (size_t i = 0; i < nbytes; i += 8) {
        uint64_t v = next_random(&g);
        size_t m = nbytes - i < 8 ? nbytes - i : 8;
        memcpy(p + i, &v, m);
    }
    /* Advance the state: its first word counts the bytes drawn. */
    if (ns->n > 0) gs_elem_set_i(ns->data, ns->type, 0, gs_elem_get_i(ns->data, ns->type, 0) + (int64_t)nbytes);
    gs_value *parts[2] = {ns, bits};
    *out = gs_value_new_tuple(2, parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

static gs_status k_rng_state(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    for (int64_t i = 0; i < r->n; i++) gs_elem_set_i(r->data, r->type, i, (int64_t)next_random(&ev->rng_state));
    *out = r;
    return GS_OK;
}

gs_kernel_fn gs_kernel_random(gs_opcode op) {
    switch (op) {
    case GS_OP_RNG: return k_rng;
    case GS_OP_RNG_BIT_GENERATOR: return k_rng_bit_generator;
    case GS_OP_RNG_GET_AND_UPDATE_STATE: return k_rng_state;
    default: return NULL;
    }
}
