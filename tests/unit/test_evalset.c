// The engine's cached eval set (lib/engine/evalset.h) on the cpu backend, through a reader of
// made-up records: the fields as fill wrote them, the padding to whole batches (zero unless fill
// writes it), the scores' room only when asked, the reader closed on every outcome, and the errors
// of an empty set, one of too many records and a fill that fails.
#include "engine/evalset.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// A reader of `n` records: record i has field 0 = i (i32) and field 1 = (i, i + 1, i + 2) (u8).
typedef struct {
    int n, opened, closed;
} fake;

static fake the;

static int fake_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e) {
    (void)paths, (void)npaths;
    if (rank != 0 || world != 1 || cfg != &the)
        return tk_err_set(e, TK_EINTERNAL, "opened as rank %d of %d", rank, world);
    the.opened++;
    *rd = &the;
    return 0;
}
static uint64_t fake_count(void *rd) { return (uint64_t)((fake *)rd)->n; }
static void fake_close(void *rd) { ((fake *)rd)->closed++; }

static int fill(void *arg, void *rd, int n, int64_t cached, void *const *host, tk_err *e) {
    int *mark = arg;
    if (n != ((fake *)rd)->n) return tk_err_set(e, TK_EINTERNAL, "fill of %d records", n);
    if (*mark < 0) return tk_err_set(e, TK_EDATA, "record 2: bad");
    int32_t *a = host[0];
    uint8_t *b = host[1];
    for (int i = 0; i < n; i++) {
        a[i] = i;
        for (int k = 0; k < 3; k++) b[3 * i + k] = (uint8_t)(i + k);
    }
    if (*mark > 0 && cached > n) a[cached - 1] = *mark; // a padding record fill writes itself
    return 0;
}

static tk_evalset_spec spec(int *mark, int64_t batch, int scores) {
    return (tk_evalset_spec){.open = fake_open, .count = fake_count, .close = fake_close, .cfg = &the, .nf = 2,
                             .bytes = {4, 3}, .batch = batch, .scores = scores, .fill = fill, .arg = mark};
}

static char *const paths[] = {"set.tks"};

// The set of n records (fill's mark as above), or NULL.
static tk_evalset *load(int n, int mark, int64_t batch, int scores) {
    tk_err e = {0};
    the = (fake){.n = n};
    tk_evalset_spec s = spec(&mark, batch, scores);
    tk_evalset *es = NULL;
    if (tk_evalset_load(tk_test_cpu(), &s, paths, 1, &es, &e)) printf("# %s\n", e.what);
    return es;
}

TK_TEST(cached_padded_to_whole_batches) {
    tk_evalset *es = load(5, 0, 4, 0);
    CHECK(es != NULL);
    if (!es) return;
    CHECK_EQ_INT(es->n, 5);
    CHECK_EQ_INT(es->cached, 8);
    CHECK_EQ_INT(tk_evalset_count(es), 5);
    CHECK_EQ_INT(es->nf, 2);
    CHECK(es->score == NULL && es->ws == NULL);
    const int32_t *a = es->field[0];
    const uint8_t *b = es->field[1];
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_INT(a[i], i < 5 ? i : 0);
        for (int k = 0; k < 3; k++) CHECK_EQ_INT(b[3 * i + k], i < 5 ? i + k : 0);
    }
    CHECK_EQ_INT(the.opened, 1);
    CHECK_EQ_INT(the.closed, 1);
    tk_evalset_free(NULL, es);
    // fill may write the padding (BERT's sequences of length 1); a batch of 1 pads nothing
    es = load(5, 77, 4, 0);
    CHECK(es && ((const int32_t *)es->field[0])[7] == 77);
    tk_evalset_free(NULL, es);
    es = load(5, 77, 1, 0);
    CHECK(es && es->cached == 5);
    tk_evalset_free(NULL, es);
}

TK_TEST(scores_room_for_auc) {
    tk_evalset *es = load(6, 0, 0, 1);
    CHECK(es && es->cached == 6 && es->score != NULL && es->ws != NULL);
    if (es) es->score[5] = 1.0f; // (n floats)
    tk_evalset_free(NULL, es);
}

static const char *msg(const tk_err *e) {
    static char buf[512];
    tk_err_format(e, buf, sizeof buf);
    return buf;
}

TK_TEST(errors_close_the_reader) {
    int mark = 0;
    tk_evalset *es = (tk_evalset *)&mark;
    tk_err e = {0};
    the = (fake){.n = 0};
    tk_evalset_spec s = spec(&mark, 4, 1);
    CHECK_EQ_INT(tk_evalset_load(tk_test_cpu(), &s, paths, 1, &es, &e), TK_EDATA);
    CHECK_STR(msg(&e), "set.tks: the eval set is empty");
    CHECK(es == NULL);
    CHECK_EQ_INT(the.closed, 1);
    memset(&e, 0, sizeof e);
    the = (fake){.n = 5};
    s.max = 4;
    CHECK_EQ_INT(tk_evalset_load(tk_test_cpu(), &s, paths, 1, &es, &e), TK_EDATA);
    CHECK_STR(msg(&e), "set.tks: the eval set has 5 records, more than 4");
    CHECK_EQ_INT(the.closed, 1);
    memset(&e, 0, sizeof e);
    the = (fake){.n = 5};
    mark = -1;
    s = spec(&mark, 4, 1);
    CHECK_EQ_INT(tk_evalset_load(tk_test_cpu(), &s, paths, 1, &es, &e), TK_EDATA);
    CHECK_STR(msg(&e), "record 2: bad");
    CHECK(es == NULL);
    CHECK_EQ_INT(the.closed, 1);
    memset(&e, 0, sizeof e);
    s.nf = TK_EVALSET_MAX_FIELDS + 1;
    CHECK_EQ_INT(tk_evalset_load(tk_test_cpu(), &s, paths, 1, &es, &e), TK_EINTERNAL);
}
