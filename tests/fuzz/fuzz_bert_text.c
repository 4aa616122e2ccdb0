// Fuzz the BERT vocabulary reader, the tokenizer and the example builder: the input is a
// vocabulary, a NUL byte, then text (the MLPerf layout). Any input must give examples that keep
// the record rules, or a TK_EDATA error, never a crash or an out-of-bounds access.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert/pretrain.h"

static void check(const bert_records *b, int32_t vocab, const bert_special *sp) {
    for (size_t i = 0; i < b->n; i++) {
        int n = b->seq_len[i], m = b->num_masked[i];
        const int16_t *ids = b->input_ids + i * (size_t)b->L;
        if (n < 5 || n > b->L || m < 1 || m > b->P || ids[0] != sp->cls || ids[n - 1] != sp->sep) abort();
        for (int t = 0; t < n; t++)
            if (ids[t] < 0 || ids[t] >= vocab) abort();
        tk_err e;
        if (bert_records_check(b, i, vocab, &e)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t vlen = (size_t)(nul - data);
    bert_vocab *v;
    tk_err e;
    if (bert_vocab_parse(&v, (const char *)data, vlen, "fuzz.vocab", &e)) {
        if (e.code != TK_EDATA && e.code != TK_EIO) abort();
        return 0;
    }
    bert_tokenizer *t = NULL;
    bert_tok_opts to = {.max_word_chars = 1 + (int)(size % 50)};
    char path[] = "/tmp/fuzz_bert_text.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || bert_vocab_size(v) > BERT_MAX_VOCAB || bert_tokenizer_new(&t, v, &to, &e)) {
        if (fd >= 0) close(fd), unlink(path);
        bert_vocab_free(v);
        return 0;
    }
    ssize_t w = write(fd, nul + 1, size - vlen - 1);
    close(fd);
    bert_corpus c;
    if (w == (ssize_t)(size - vlen - 1) && bert_corpus_read(&c, t, path, 1 + (int)(size % 3), &e) == 0) {
        bert_pretrain_opts o;
        bert_pretrain_defaults(&o);
        o.max_seq_length = 5 + (int)(size % 40);
        o.max_predictions = 1 + (int)(size % 7);
        o.dupe_factor = 2;
        o.rng = size % 2 ? BERT_RNG_MT : BERT_RNG_PHILOX;
        o.pick = size % 5 == 0 ? 7 : 0;
        bert_special sp;
        bert_examples x;
        bert_records b;
        if (bert_vocab_special(v, &sp, &e) == 0 &&
            bert_examples_make(&x, &c, path, &o, &sp, bert_vocab_size(v), &e) == 0) {
            if (bert_records_init(&b, o.max_seq_length, o.max_predictions, 16, &e) == 0) {
                for (size_t k = 0; k < x.norder; k += 16) {
                    size_t n = x.norder - k < 16 ? x.norder - k : 16;
                    bert_examples_fill(&x, &sp, k, n, &b);
                    check(&b, bert_vocab_size(v), &sp);
                }
                bert_records_free(&b);
            }
            bert_examples_free(&x);
        } else {
            bert_corpus_free(&c);
        }
    } else if (e.code != TK_EDATA && e.code != TK_EIO) {
        abort();
    }
    unlink(path);
    bert_tokenizer_free(t);
    bert_vocab_free(v);
    return 0;
}
