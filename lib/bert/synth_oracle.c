// The oracle of the synthetic BERT text: for each masked position of an eval example, the
// posterior over the true token given everything the example shows, by exact forward-backward
// inference over the grammar's hidden Markov chain, and the accuracy of predicting its argmax.
//
// Hidden states, per topic k: (k, w, j), piece j of word w, and (k, END), the "." that ends a
// sentence. (k, w, last piece) goes to (k, END) with p_end, else to (k, w', 0) with (1 - p_end)
// (t U_k(w') + (1 - t) P_k(w' | w)), U_k the topic's own words, t = p_topic; (k, END) goes to
// (k, w', 0) with t U_k(w') + (1 - t) S_k(w'), S_k the start words (an article keeps its topic).
// Each state shows one token. The model of an example (the approximations of the oracle):
//   - segment A starts from the chain's stationary distribution pi; B continues the chain from
//     A's last state with probability 1/2, else starts afresh from pi (the random next sentence);
//   - each of the n non-special positions is masked independently with q = masked / n; a masked
//     position shows [MASK] (0.8), its token (0.1) or a uniformly random token (0.1), so a shown
//     token o has likelihood (1 - 0.9 q) [x = o] + 0.1 q / V and [MASK] a constant; at the position
//     predicted, which is masked, that is 0.1 [x = o] + 0.1 / V, or a constant for [MASK].
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bert/synth_int.h"

typedef struct {
    const syn_grammar *g;
    int T1;                 // states per topic (pieces of all words, then END)
    size_t S;               // all states
    int32_t V, mask_id;
    int32_t *base, *len;    // [W] first state of word w within a topic, and its pieces
    int32_t *emit;          // [S] the token each state shows
    int32_t *tok_off, *tok_state; // states showing token x: tok_state[tok_off[x] .. tok_off[x+1])
    double *pi;             // [S] stationary distribution
    double *first;          // [S] the first state of a sentence (topic uniform)
    // How the examples were cut, measured on them: the chance that A starts inside a sentence
    // (front truncation), that a random B does, that a following B does not start where A ends
    // (truncation between them), that B is random, and that A or B ends inside a sentence.
    double a_inside, br_inside, bc_gap, p_random, a_cut_end, b_cut_end;
} model;

static void model_free(model *m) {
    free(m->base);
    free(m->len);
    free(m->emit);
    free(m->tok_off);
    free(m->tok_state);
    free(m->pi);
    free(m->first);
}

// One step of the chain within topic k: ak -> ok (its T1 states), with `inflow` the mass that
// arrives from the topic's END to start a sentence. A next word is one of the topic's own words
// with p_topic, else a successor of the word before (or, first in a sentence, a start word).
static void step_topic(const model *m, int k, const double *ak, double *ok, double inflow) {
    const syn_grammar *g = m->g;
    int T1 = m->T1, W = g->W, K = g->K, KS = g->KS, Z = g->Z;
    double ends = 0;
    for (int w = 0; w < W; w++) {
        int b = m->base[w], l = m->len[w];
        ok[b] = 0;
        for (int j = l - 1; j >= 1; j--) ok[b + j] = ak[b + j - 1];
        ends += ak[b + l - 1];
    }
    double pt = g->p_topic, ps = 1 - pt;
    for (int w = 0; w < W && ps > 0; w++) {
        double x = ps * (1 - g->p_end) * ak[m->base[w] + m->len[w] - 1];
        if (x == 0) continue;
        const int32_t *su = g->succ + ((size_t)k * (size_t)W + (size_t)w) * (size_t)K;
        for (int j = 0; j < K; j++) ok[m->base[su[j]]] += x * g->psucc[j];
    }
    const int32_t *st = g->start + (size_t)k * (size_t)KS, *tw = g->tword + (size_t)k * (size_t)Z;
    for (int j = 0; j < KS; j++) ok[m->base[st[j]]] += ps * inflow * g->pstart[j];
    double topical = pt * ((1 - g->p_end) * ends + inflow);
    for (int j = 0; j < Z && pt > 0; j++) ok[m->base[tw[j]]] += topical * g->ptword[j];
    ok[T1 - 1] = g->p_end * ends;
}

// out = the distribution one step after a (a and out are different buffers). An article keeps
// its topic: END of topic k starts the next sentence of topic k.
static void propagate(const model *m, const double *a, double *out) {
    int T1 = m->T1, M = m->g->M;
    for (int k = 0; k < M; k++)
        step_topic(m, k, a + (size_t)k * (size_t)T1, out + (size_t)k * (size_t)T1,
                   a[(size_t)k * (size_t)T1 + (size_t)T1 - 1]);
}

// out(s) = sum over s'' of P(s -> s'') b(s''): one step of the backward recursion.
static void back(const model *m, const double *b, double *out) {
    const syn_grammar *g = m->g;
    int T1 = m->T1, W = g->W, K = g->K, KS = g->KS, M = g->M, Z = g->Z;
    double pt = g->p_topic, ps = 1 - pt;
    for (int k = 0; k < M; k++) {
        const double *bk = b + (size_t)k * (size_t)T1;
        double *ok = out + (size_t)k * (size_t)T1;
        const int32_t *tw = g->tword + (size_t)k * (size_t)Z, *st = g->start + (size_t)k * (size_t)KS;
        double topical = 0, v = 0;
        for (int j = 0; j < Z; j++) topical += g->ptword[j] * bk[m->base[tw[j]]];
        for (int w = 0; w < W; w++) {
            int base = m->base[w], l = m->len[w];
            for (int j = 0; j < l - 1; j++) ok[base + j] = bk[base + j + 1];
            const int32_t *su = g->succ + ((size_t)k * (size_t)W + (size_t)w) * (size_t)K;
            double u = 0;
            for (int j = 0; j < K; j++) u += g->psucc[j] * bk[m->base[su[j]]];
            ok[base + l - 1] = g->p_end * bk[T1 - 1] + (1 - g->p_end) * (pt * topical + ps * u);
        }
        for (int j = 0; j < KS; j++) v += g->pstart[j] * bk[m->base[st[j]]];
        ok[T1 - 1] = pt * topical + ps * v;
    }
}

static int model_init(model *m, const syn_grammar *g, const bert_special *sp, tk_err *e) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->V = bert_vocab_size(g->vocab);
    m->mask_id = sp->mask;
    m->base = malloc((size_t)g->W * sizeof *m->base);
    m->len = malloc((size_t)g->W * sizeof *m->len);
    if (!m->base || !m->len) return tk_err_errno(e, ENOMEM, "out of memory");
    int32_t t = 0;
    for (int w = 0; w < g->W; w++) {
        m->base[w] = t;
        m->len[w] = g->poff[w + 1] - g->poff[w];
        t += m->len[w];
    }
    m->T1 = t + 1;
    m->S = (size_t)g->M * (size_t)m->T1;
    m->emit = malloc(m->S * sizeof *m->emit);
    m->tok_off = calloc((size_t)m->V + 1, sizeof *m->tok_off);
    m->tok_state = malloc(m->S * sizeof *m->tok_state);
    m->pi = malloc(m->S * sizeof *m->pi);
    m->first = calloc(m->S, sizeof *m->first);
    double *nx = malloc(m->S * sizeof *nx);
    if (!m->emit || !m->tok_off || !m->tok_state || !m->pi || !m->first || !nx) {
        free(nx);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    for (int k = 0; k < g->M; k++) {
        int32_t *ek = m->emit + (size_t)k * (size_t)m->T1;
        for (int w = 0; w < g->W; w++)
            for (int j = 0; j < m->len[w]; j++) ek[m->base[w] + j] = g->piece[g->poff[w] + j];
        ek[m->T1 - 1] = g->dot;
    }
    for (size_t s = 0; s < m->S; s++) m->tok_off[m->emit[s] + 1]++;
    for (int32_t x = 0; x < m->V; x++) m->tok_off[x + 1] += m->tok_off[x];
    int32_t *fill = calloc((size_t)m->V, sizeof *fill);
    if (!fill) {
        free(nx);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    for (size_t s = 0; s < m->S; s++) m->tok_state[m->tok_off[m->emit[s]] + fill[m->emit[s]]++] = (int32_t)s;
    free(fill);
    // The stationary distribution. Articles draw their topic uniformly and all have the same
    // number of sentences, so each topic has as many sentences, and pi(k, s) is proportional to
    // the expected visits of (k, s) during one sentence of topic k:
    // the sum over n of start_k Q_k^n, Q_k the chain inside the topic (the mass that reaches END
    // leaves; END itself is visited once).
    double *x = m->pi, *y = nx, total = 0;
    memset(m->pi, 0, m->S * sizeof *m->pi);
    double *acc = calloc(m->S, sizeof *acc);
    if (!acc) {
        free(nx);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    for (int k = 0; k < g->M; k++) {
        size_t off = (size_t)k * (size_t)m->T1;
        memset(x, 0, (size_t)m->T1 * sizeof *x);
        step_topic(m, k, x, y, 1.0); // the first states of a sentence
        for (int it = 0; it < 1000000; it++) {
            double left = 0;
            y[m->T1 - 1] = 0;
            for (int s = 0; s < m->T1; s++) acc[off + (size_t)s] += y[s], left += y[s];
            if (left < 1e-17) break;
            double *t = x;
            x = y;
            y = t;
            step_topic(m, k, x, y, 0.0);
        }
        acc[off + (size_t)m->T1 - 1] = 1; // END, once a sentence
    }
    for (size_t s = 0; s < m->S; s++) total += acc[s];
    for (size_t s = 0; s < m->S; s++) m->pi[s] = acc[s] / total;
    free(acc);
    free(nx);
    for (int k = 0; k < g->M; k++) { // the first word of a sentence: a topic word or a start word
        double *fk = m->first + (size_t)k * (size_t)m->T1;
        for (int j = 0; j < g->KS; j++) fk[m->base[g->start[(size_t)k * (size_t)g->KS + (size_t)j]]] += (1 - g->p_topic) * g->pstart[j] / g->M;
        for (int j = 0; j < g->Z; j++) fk[m->base[g->tword[(size_t)k * (size_t)g->Z + (size_t)j]]] += g->p_topic * g->ptword[j] / g->M;
    }
    return 0;
}

// out = (1 - inside) first + inside pi: where a segment starts.
static void seg_start(const model *m, double inside, double *out) {
    for (size_t s = 0; s < m->S; s++) out[s] = (1 - inside) * m->first[s] + inside * m->pi[s];
}

// Whether token offset tok is a sentence boundary (a start, or the end of the last sentence).
static int boundary(const bert_corpus *c, uint64_t tok) {
    size_t lo = 0, hi = c->nsent + 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->sent[mid] < tok) lo = mid + 1;
        else hi = mid;
    }
    return lo <= c->nsent && c->sent[lo] == tok;
}

// v *= the evidence that a segment ends here: at the end of a sentence (END), unless cut.
static void seg_end(const model *m, double *v, double cut) {
    for (int k = 0; k < m->g->M; k++)
        for (int s = 0; s < m->T1 - 1; s++) v[(size_t)k * (size_t)m->T1 + (size_t)s] *= cut;
}

// v *= the likelihood of showing token o (not [MASK]) with masking rate q.
static void observe(const model *m, double *v, int32_t o, double q) {
    double c0 = 0.1 * q / m->V, c1 = 1 - 0.9 * q;
    for (size_t s = 0; s < m->S; s++) v[s] *= c0;
    if (o >= 0 && o < m->V)
        for (int32_t i = m->tok_off[o]; i < m->tok_off[o + 1]; i++) v[m->tok_state[i]] *= (c0 + c1) / c0;
}

static double normalize(double *v, size_t n) {
    double z = 0;
    for (size_t i = 0; i < n; i++) z += v[i];
    if (z > 0)
        for (size_t i = 0; i < n; i++) v[i] /= z;
    return z;
}

typedef struct {
    double *a, *b, *c, *d, *acc;  // S-sized work vectors, acc V-sized
    float *stored;                // [P][S] backward messages at the masked positions
    int32_t *touched;
    int *slot;                    // [L] index of each masked position in the example, or -1
} work;

typedef struct {
    double hits, expected, unigram, nsp;
    int masked;
} ex_result;

// The posterior at a masked position: gamma = pred * beta over states, summed per token, times the
// likelihood of what the position shows given that it is masked.
static void posterior(const model *m, work *w, const double *pred, const float *beta, int32_t shown, int32_t label,
                      int32_t unigram, ex_result *r) {
    int nt = 0;
    for (size_t s = 0; s < m->S; s++) {
        double gmm = pred[s] * (double)beta[s];
        if (gmm == 0) continue;
        int32_t x = m->emit[s];
        if (w->acc[x] == 0) w->touched[nt++] = x;
        w->acc[x] += gmm;
    }
    int masked_shown = shown == m->mask_id;
    double total = 0, best = -1;
    int32_t arg = -1;
    for (int i = 0; i < nt; i++) {
        int32_t x = w->touched[i];
        double p = w->acc[x] * (masked_shown ? 1.0 : 0.1 / m->V + (x == shown ? 0.1 : 0.0));
        total += p;
        if (p > best || (p == best && x < arg)) best = p, arg = x;
        w->acc[x] = 0;
    }
    r->masked++;
    if (total > 0) {
        r->expected += best / total;
        r->hits += arg == label;
    }
    r->unigram += label == unigram;
}

static void run_example(const model *m, work *w, const bert_records *rec, int32_t unigram, ex_result *r) {
    size_t S = m->S;
    int n = rec->seq_len[0], nm = rec->num_masked[0], la = 0;
    const int16_t *ids = rec->input_ids, *pos = rec->mlm_pos, *mid = rec->mlm_ids;
    while (la + 2 < n && rec->segment_ids[la + 2] == 0) la++; // A = positions 1..la
    int b0 = la + 2, last = n - 2;
    double q = (double)nm / (double)(n - 3);
    int *slot = w->slot;
    memset(slot, 0xff, (size_t)n * sizeof *slot);
    for (int k = 0; k < nm; k++) slot[pos[k]] = k;
    double *beta = w->a, *tmp = w->b;
    // Backward over B, then across the boundary, then over A. Each segment ends at a sentence
    // end unless truncation cut it.
    for (size_t s = 0; s < S; s++) beta[s] = 1;
    seg_end(m, beta, m->b_cut_end);
    for (int t = last; t >= 1; t--) {
        if (t == la + 1) continue; // the [SEP] between the segments
        if (slot[t] >= 0)
            for (size_t s = 0; s < S; s++) w->stored[(size_t)slot[t] * S + s] = (float)beta[s];
        if (t == 1) break;
        if (ids[t] != m->mask_id) observe(m, beta, ids[t], q);
        if (t == b0) { // B: random, or following A (directly, or after a gap cut out)
            seg_start(m, m->br_inside, tmp);
            double fresh = 0, gap = 0;
            for (size_t s = 0; s < S; s++) fresh += tmp[s] * beta[s], gap += m->pi[s] * beta[s];
            back(m, beta, tmp);
            double pr = m->p_random, pc = 1 - pr;
            for (size_t s = 0; s < S; s++) beta[s] = pc * ((1 - m->bc_gap) * tmp[s] + m->bc_gap * gap) + pr * fresh;
            seg_end(m, beta, m->a_cut_end);
        } else {
            back(m, beta, tmp);
            memcpy(beta, tmp, S * sizeof *beta);
        }
        double mx = 0;
        for (size_t s = 0; s < S; s++) mx = beta[s] > mx ? beta[s] : mx;
        if (mx > 0)
            for (size_t s = 0; s < S; s++) beta[s] /= mx;
    }
    // Forward over A.
    double *pred = w->a, *alpha = w->b;
    seg_start(m, m->a_inside, pred);
    for (int t = 1; t <= la; t++) {
        if (slot[t] >= 0) posterior(m, w, pred, w->stored + (size_t)slot[t] * S, ids[t], mid[slot[t]], unigram, r);
        memcpy(alpha, pred, S * sizeof *alpha);
        if (ids[t] != m->mask_id) observe(m, alpha, ids[t], q);
        if (t == la) seg_end(m, alpha, m->a_cut_end);
        normalize(alpha, S);
        propagate(m, alpha, pred);
    }
    // Forward over B under both hypotheses, weighted by their likelihoods so far.
    double *pc = pred, *pr = w->c, *mix = w->d, lc = log(1 - m->p_random), lr = log(m->p_random);
    for (size_t s = 0; s < S; s++) pc[s] = (1 - m->bc_gap) * pc[s] + m->bc_gap * m->pi[s];
    seg_start(m, m->br_inside, pr);
    for (int t = b0; t <= last; t++) {
        if (slot[t] >= 0) {
            double mxl = lc > lr ? lc : lr, wc = exp(lc - mxl), wr = exp(lr - mxl), z = wc + wr;
            for (size_t s = 0; s < S; s++) mix[s] = (wc * pc[s] + wr * pr[s]) / z;
            posterior(m, w, mix, w->stored + (size_t)slot[t] * S, ids[t], mid[slot[t]], unigram, r);
        }
        for (int h = 0; h < 2; h++) {
            double *p = h ? pr : pc;
            memcpy(alpha, p, S * sizeof *alpha);
            if (ids[t] != m->mask_id) observe(m, alpha, ids[t], q);
            if (t == last) seg_end(m, alpha, m->b_cut_end);
            double z = normalize(alpha, S);
            *(h ? &lr : &lc) += log(z > 0 ? z : 1e-300);
            propagate(m, alpha, p);
        }
    }
    r->nsp = (lr > lc) == (rec->nsp[0] == 1);
}

int syn_oracle_run(const syn_grammar *g, const bert_examples *x, const bert_special *sp, int L, int P, size_t n_eval,
                   int threads, syn_oracle *out, tk_err *e) {
    memset(out, 0, sizeof *out);
    if (n_eval == 0 || x->norder == 0) return 0;
    model m;
    int rc = model_init(&m, g, sp, e);
    ex_result *res = calloc(n_eval, sizeof *res);
    if (!rc && !res) rc = tk_err_errno(e, ENOMEM, "out of memory");
    // The unigram predictor: the token the stationary chain shows most often.
    double *tokmass = rc ? NULL : calloc((size_t)m.V, sizeof *tokmass);
    if (!rc && !tokmass) rc = tk_err_errno(e, ENOMEM, "out of memory");
    int32_t unigram = 0;
    if (!rc) {
        for (size_t s = 0; s < m.S; s++) tokmass[m.emit[s]] += m.pi[s];
        for (int32_t t = 1; t < m.V; t++)
            if (tokmass[t] > tokmass[unigram]) unigram = t;
    }
    free(tokmass);
    if (!rc) { // the priors of how examples are cut, from the examples themselves
        size_t na = 0, nr = 0, nri = 0, nc = 0, ncg = 0, nae = 0, nbe = 0;
        for (size_t i = 0; i < n_eval; i++) {
            const bert_inst *in = &x->inst[x->order[(size_t)((double)i * (double)x->norder / (double)n_eval)]];
            na += !boundary(&x->c, in->a);
            nae += !boundary(&x->c, in->a + in->la);
            nbe += !boundary(&x->c, in->b + in->lb);
            if (in->random_next) {
                nr++;
                nri += !boundary(&x->c, in->b);
            } else {
                nc++;
                ncg += in->b != in->a + in->la;
            }
        }
        m.a_inside = (double)na / (double)n_eval;
        m.p_random = (double)nr / (double)n_eval;
        m.br_inside = nr ? (double)nri / (double)nr : 0;
        m.bc_gap = nc ? (double)ncg / (double)nc : 0;
        m.a_cut_end = (double)nae / (double)n_eval;
        m.b_cut_end = (double)nbe / (double)n_eval;
        if (m.p_random <= 0) m.p_random = 1e-9;
        if (m.p_random >= 1) m.p_random = 1 - 1e-9;
        out->a_inside = m.a_inside;
        out->br_inside = m.br_inside;
        out->bc_gap = m.bc_gap;
        out->a_cut_end = m.a_cut_end;
        out->b_cut_end = m.b_cut_end;
    }
    int failed = 0;
    if (!rc) {
#pragma omp parallel num_threads(threads > 1 ? threads : 1)
        {
            work w = {0};
            bert_records rec;
            int ok = bert_records_init(&rec, L, P, 1, NULL) == 0;
            w.a = malloc(m.S * sizeof *w.a);
            w.b = malloc(m.S * sizeof *w.b);
            w.c = malloc(m.S * sizeof *w.c);
            w.d = malloc(m.S * sizeof *w.d);
            w.acc = calloc((size_t)m.V, sizeof *w.acc);
            w.touched = malloc((size_t)m.V * sizeof *w.touched);
            w.stored = malloc((size_t)P * m.S * sizeof *w.stored);
            w.slot = malloc((size_t)L * sizeof *w.slot);
            ok = ok && w.a && w.b && w.c && w.d && w.acc && w.touched && w.stored && w.slot;
            if (!ok) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp for schedule(dynamic, 4)
            for (size_t i = 0; i < n_eval; i++) {
                if (!ok) continue;
                size_t idx = (size_t)((double)i * (double)x->norder / (double)n_eval);
                bert_examples_fill(x, sp, idx, 1, &rec);
                run_example(&m, &w, &rec, unigram, &res[i]);
            }
            if (ok) bert_records_free(&rec);
            free(w.a), free(w.b), free(w.c), free(w.d), free(w.acc), free(w.touched), free(w.stored), free(w.slot);
        }
        if (failed) rc = tk_err_errno(e, ENOMEM, "out of memory for the oracle (%zu states)", m.S);
    }
    if (!rc) {
        size_t random_next = 0;
        for (size_t i = 0; i < n_eval; i++) { // in order: the sums do not depend on the threads
            out->hits += res[i].hits;
            out->expected += res[i].expected;
            out->unigram_hits += res[i].unigram;
            out->nsp_hits += res[i].nsp;
            out->masked += (uint64_t)res[i].masked;
            random_next += x->inst[x->order[(size_t)((double)i * (double)x->norder / (double)n_eval)]].random_next;
        }
        out->examples = n_eval;
        out->unigram_token = unigram;
        out->random_next = (double)random_next / (double)n_eval;
    }
    free(res);
    model_free(&m);
    return rc;
}
