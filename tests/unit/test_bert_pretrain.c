// create_pretraining_data semantics of `prep bert`, checked on a corpus whose tokens are numbered
// in reading order (token t<i> has id 5 + i), so an example's original segments must be runs of
// consecutive ids, and sentence and document boundaries are known from the ids alone. Exact checks
// on every example, statistical ones on the 80/10/10 split, the next-sentence ratio and the
// truncation ends; CPython's random module gives the reference numbers of the MT generator.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert/pretrain.h"
#include "tk_test.h"

#define NTOK 20000
#define FIRST_ID 5
enum { CLS = 2, SEP = 3, MASK = 4 };

static int sent_start[NTOK + 1], sent_end[NTOK + 1]; // by token number: starts/ends a sentence
static int doc_of[NTOK];

// Writes the vocabulary and a corpus of documents of sentences of 3..9 tokens.
static void make_files(const char *vocab, const char *text, int ndocs, int sents_per_doc) {
    FILE *v = fopen(vocab, "w"), *t = fopen(text, "w");
    fprintf(v, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
    for (int i = 0; i < NTOK; i++) fprintf(v, "t%d\n", i);
    int k = 0;
    memset(sent_start, 0, sizeof sent_start);
    memset(sent_end, 0, sizeof sent_end);
    for (int d = 0; d < ndocs; d++) {
        for (int s = 0; s < sents_per_doc; s++) {
            int len = 3 + (d * 7 + s * 5) % 7;
            sent_start[k] = 1;
            if (k + len > NTOK) abort();
            for (int j = 0; j < len; j++, k++) {
                doc_of[k] = d;
                fprintf(t, "%sT%d", j ? " " : "", k); // capitals: the tokenizer lower-cases
            }
            sent_end[k - 1] = 1;
            fprintf(t, "\n");
        }
        fprintf(t, d % 3 ? "\n" : "\n \n\n"); // blank lines, sometimes several
    }
    if (k > NTOK) abort();
    fclose(v);
    fclose(t);
}

typedef struct {
    bert_vocab *v;
    bert_tokenizer *t;
    bert_special sp;
    bert_examples x;
    bert_records rec;
    char vocab[64], text[64];
} run;

static int make(run *r, const bert_pretrain_opts *o, int threads) {
    tk_err e;
    bert_corpus c;
    if (bert_vocab_load(&r->v, r->vocab, &e) || bert_tokenizer_new(&r->t, r->v, NULL, &e) ||
        bert_vocab_special(r->v, &r->sp, &e) || bert_corpus_read(&c, r->t, r->text, threads, &e) ||
        bert_examples_make(&r->x, &c, r->text, o, &r->sp, bert_vocab_size(r->v), &e) ||
        bert_records_init(&r->rec, o->max_seq_length, o->max_predictions, r->x.norder ? r->x.norder : 1, &e)) {
        printf("# %s: %s\n", e.where, e.what);
        return -1;
    }
    bert_examples_fill(&r->x, &r->sp, 0, r->x.norder, &r->rec);
    return 0;
}

static void done(run *r) {
    bert_records_free(&r->rec);
    bert_examples_free(&r->x);
    bert_tokenizer_free(r->t);
    bert_vocab_free(r->v);
}

static void files(run *r, const char *tag, int ndocs, int spd) {
    memset(r, 0, sizeof *r);
    snprintf(r->vocab, sizeof r->vocab, "/tmp/tk_bert_%d_%s.vocab", (int)getpid(), tag);
    snprintf(r->text, sizeof r->text, "/tmp/tk_bert_%d_%s.txt", (int)getpid(), tag);
    make_files(r->vocab, r->text, ndocs, spd);
}

static void unlink_files(run *r) {
    unlink(r->vocab);
    unlink(r->text);
}

// round(x) as Python 3 does it: half to even.
static long round_half_even(double x) {
    double f = floor(x), d = x - f;
    if (d > 0.5) return (long)f + 1;
    if (d < 0.5) return (long)f;
    return ((long)f % 2 == 0) ? (long)f : (long)f + 1;
}

typedef struct {
    long examples, masked, shown_mask, shown_same, random_next, a_front, a_back, b_front, b_back, doc_ends;
} stats;

// Every exact rule on every example; the counts for the statistical ones.
static void check_examples(int *tk_failed_, const run *r, const bert_pretrain_opts *o, stats *st) {
    const bert_records *b = &r->rec;
    int L = b->L, P = b->P;
    memset(st, 0, sizeof *st);
    for (size_t i = 0; i < b->n; i++) {
        const int16_t *ids = b->input_ids + i * (size_t)L, *pos = b->mlm_pos + i * (size_t)P,
                      *lab = b->mlm_ids + i * (size_t)P;
        const uint8_t *seg = b->segment_ids + i * (size_t)L;
        int n = b->seq_len[i], m = b->num_masked[i], la = 0;
        CHECK(n >= 5 && n <= L);
        while (la + 2 < n && seg[la + 2] == 0) la++;
        int lb = n - la - 3;
        CHECK(la >= 1 && lb >= 1);
        CHECK_EQ_INT(ids[0], CLS);
        CHECK_EQ_INT(ids[la + 1], SEP);
        CHECK_EQ_INT(ids[n - 1], SEP);
        for (int t = 0; t < L; t++) {
            CHECK_EQ_INT(seg[t], t >= la + 2 && t < n ? 1 : 0);
            if (t >= n) CHECK_EQ_INT(ids[t], 0);
        }
        long want = round_half_even((double)n * o->masked_lm_prob);
        if (want < 1) want = 1;
        if (want > P) want = P;
        if (want > n - 3) want = n - 3;
        CHECK_EQ_INT(m, want);
        int orig[BERT_MAX_SEQ];
        for (int t = 0; t < n; t++) orig[t] = ids[t];
        for (int k = 0; k < m; k++) {
            CHECK(pos[k] >= 1 && pos[k] <= n - 2 && pos[k] != la + 1); // never [CLS] or a [SEP]
            if (k) CHECK(pos[k] > pos[k - 1]);
            orig[pos[k]] = lab[k];
            st->shown_mask += ids[pos[k]] == MASK;
            st->shown_same += ids[pos[k]] == lab[k];
        }
        for (int k = m; k < P; k++) CHECK(pos[k] == 0 && lab[k] == 0);
        // The original segments are runs of consecutive tokens within one document.
        int a0 = orig[1] - FIRST_ID, b0 = orig[la + 2] - FIRST_ID;
        for (int t = 1; t <= la; t++) CHECK_EQ_INT(orig[t] - FIRST_ID, a0 + t - 1);
        for (int t = 0; t < lb; t++) CHECK_EQ_INT(orig[la + 2 + t] - FIRST_ID, b0 + t);
        CHECK(doc_of[a0] == doc_of[a0 + la - 1] && doc_of[b0] == doc_of[b0 + lb - 1]);
        int nsp = b->nsp[i];
        CHECK(nsp == 0 || nsp == 1);
        if (nsp == 0) CHECK(doc_of[b0] == doc_of[a0] && b0 >= a0 + la); // B follows A
        else CHECK(doc_of[b0] != doc_of[a0]);                          // another document here
        st->random_next += nsp;
        st->a_front += !sent_start[a0];
        st->a_back += !sent_end[a0 + la - 1];
        st->b_front += !sent_start[b0];
        st->b_back += !sent_end[b0 + lb - 1];
        // When truncation cut anything, the pair is exactly max_seq_length - 3 tokens long.
        if (!sent_start[a0] || !sent_end[a0 + la - 1] || !sent_start[b0] || !sent_end[b0 + lb - 1])
            CHECK_EQ_INT(la + lb, L - 3);
        st->examples++;
        st->masked += m;
    }
}

// |observed - expected| within 4 standard deviations of a binomial count.
static int near(long count, long n, double p) {
    double sd = sqrt((double)n * p * (1 - p));
    return fabs((double)count - (double)n * p) <= 4 * sd + 1;
}

TK_TEST(examples_follow_the_reference_rules) {
    run r;
    files(&r, "rules", 60, 40);
    for (int kind = 0; kind < 2; kind++) {
        bert_pretrain_opts o;
        bert_pretrain_defaults(&o);
        o.max_seq_length = 48;
        o.max_predictions = 9;
        o.rng = kind ? BERT_RNG_MT : BERT_RNG_PHILOX;
        CHECK_EQ_INT(make(&r, &o, 1), 0);
        stats st;
        check_examples(tk_failed_, &r, &o, &st);
        printf("# %s: %ld examples, %ld masked, %ld [MASK], %ld same, %ld random next\n", kind ? "mt" : "philox",
               st.examples, st.masked, st.shown_mask, st.shown_same, st.random_next);
        CHECK(st.examples > 3000);
        CHECK(near(st.shown_mask, st.masked, 0.8));
        // kept 10%, plus a random draw that lands on the token itself (1 in V)
        CHECK(near(st.shown_same, st.masked, 0.1 + 0.1 / (NTOK + 5)));
        // Half the chunks take a random B; one-sentence chunks (at most one per document and pass,
        // at its end) always do.
        long ends = 60L * o.dupe_factor;
        CHECK(st.random_next >= st.examples / 2 - 4 * sqrt(st.examples / 4.0));
        CHECK(st.random_next <= (st.examples + ends) / 2 + 4 * sqrt(st.examples / 4.0));
        // Truncation takes the first or the last token of the longer segment, evenly.
        long fronts = st.a_front + st.b_front, cuts = fronts + st.a_back + st.b_back;
        printf("# truncation: %ld front, %ld back\n", fronts, cuts - fronts);
        CHECK(cuts > 500 && near(fronts, cuts, 0.5));
        done(&r);
    }
    unlink_files(&r);
}

TK_TEST(short_sequences_and_defaults) {
    run r;
    files(&r, "short", 30, 60);
    bert_pretrain_opts o;
    bert_pretrain_defaults(&o); // 512, 76, 0.15, 0.1, 10
    CHECK_EQ_INT(o.max_seq_length, 512);
    CHECK_EQ_INT(o.max_predictions, 76);
    CHECK_EQ_INT(o.dupe_factor, 10);
    CHECK_EQ_INT(make(&r, &o, 2), 0);
    stats st;
    check_examples(tk_failed_, &r, &o, &st);
    // short_seq_prob 0.1: some examples aim below the full length; documents of 60 sentences
    // (about 360 tokens) end far from 509 anyway, so count examples under 150 tokens instead.
    long shorter = 0;
    for (size_t i = 0; i < r.rec.n; i++) shorter += r.rec.seq_len[i] < 150;
    CHECK(shorter > 0);
    done(&r);
    unlink_files(&r);
}

TK_TEST(same_seed_same_examples_any_threads) {
    run a, b;
    files(&a, "det", 40, 30);
    b = a;
    bert_pretrain_opts o;
    bert_pretrain_defaults(&o);
    o.max_seq_length = 64;
    o.max_predictions = 10;
    CHECK_EQ_INT(make(&a, &o, 1), 0);
    CHECK_EQ_INT(make(&b, &o, 4), 0);
    CHECK_EQ_INT(a.rec.n, b.rec.n);
    CHECK(memcmp(a.rec.input_ids, b.rec.input_ids, a.rec.n * 64 * 2) == 0);
    CHECK(memcmp(a.rec.mlm_pos, b.rec.mlm_pos, a.rec.n * 10 * 2) == 0);
    done(&b);
    o.seed = 99;
    CHECK_EQ_INT(make(&b, &o, 1), 0);
    CHECK(a.rec.n != b.rec.n || memcmp(a.rec.input_ids, b.rec.input_ids, a.rec.n * 64 * 2) != 0);
    // --pick N keeps example int(i * count / N) of the full order.
    done(&b);
    o.seed = 12345;
    o.pick = 77;
    CHECK_EQ_INT(make(&b, &o, 1), 0);
    CHECK_EQ_INT(b.rec.n, 77);
    for (int i = 0; i < 77; i++) {
        size_t j = (size_t)((double)i * ((double)a.rec.n / 77.0));
        CHECK(memcmp(b.rec.input_ids + (size_t)i * 64, a.rec.input_ids + j * 64, 128) == 0);
    }
    done(&a);
    done(&b);
    unlink_files(&a);
}

TK_TEST(mt_is_cpython_random) {
    // Values printed by CPython 3.11: r = random.Random(12345); r.random(), r.random(),
    // [r.randrange(10) for _ in range(5)], x = list(range(10)); r.shuffle(x); r.randrange(1),
    // r.randrange(2**31); random.Random(2**40 + 7).random(); random.Random(0).random().
    bert_rng r;
    bert_rng_init(&r, BERT_RNG_MT, 12345, 0);
    double a = bert_rng_random(&r), b = bert_rng_random(&r);
    CHECK(a == 0.41661987254534116);
    CHECK(b == 0.010169169457068361);
    static const uint32_t want5[5] = {4, 5, 3, 4, 9};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(bert_rng_below(&r, 10), want5[i]);
    int x[10], want[10] = {7, 9, 4, 1, 8, 3, 0, 5, 2, 6};
    for (int i = 0; i < 10; i++) x[i] = i;
    bert_rng_shuffle(&r, x, 10, sizeof *x);
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(x[i], want[i]);
    CHECK_EQ_INT(bert_rng_below(&r, 1), 0);
    CHECK_EQ_INT(bert_rng_below(&r, 1u << 31), 392105170);
    bert_rng_init(&r, BERT_RNG_MT, (1ull << 40) + 7, 0);
    CHECK(bert_rng_random(&r) == 0.6137037779936511);
    bert_rng_init(&r, BERT_RNG_MT, 0, 0);
    CHECK(bert_rng_random(&r) == 0.8444218515250481);
}

TK_TEST(philox_streams) {
    bert_rng a, b, c, d;
    bert_rng_init(&d, BERT_RNG_PHILOX, 8, 0);
    bert_rng_init(&a, BERT_RNG_PHILOX, 7, bert_rng_tag("part-00001-of-00500"));
    bert_rng_init(&b, BERT_RNG_PHILOX, 7, bert_rng_tag("part-00001-of-00500"));
    bert_rng_init(&c, BERT_RNG_PHILOX, 7, bert_rng_tag("part-00002-of-00500"));
    int same = 1, diff = 0;
    long below[4] = {0};
    for (int i = 0; i < 40000; i++) {
        uint32_t x = bert_rng_u32(&a), y = bert_rng_u32(&b), z = bert_rng_u32(&c);
        same &= x == y;
        diff += x != z;
        below[bert_rng_below(&d, 4)]++;
    }
    CHECK(same);
    CHECK(diff > 39990);
    for (int k = 0; k < 4; k++) CHECK(near(below[k], 40000, 0.25));
}
