// sentencepiece through its command-line tools (Debian package sentencepiece): the library is
// C++, and its CLIs are the same code as Python's sentencepiece, so the ids are the ones the
// reference's Tokenizer gets. One spm_encode process encodes every transcript (a pipe both ways).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "librispeech/librispeech.h"

int ls_spm_train(const char *dir, int vocab, tk_err *e) {
    TRY(ls_need_tool("spm_train", "sentencepiece", e));
    char model[64], vs[64];
    snprintf(model, sizeof model, "--model_prefix=librispeech%d", vocab);
    snprintf(vs, sizeof vs, "--vocab_size=%d", vocab);
    // scripts/create_sentencepieces.sh: vocab_size=1023, character_coverage=1.0, bos_id=-1,
    // eos_id=-1, model_type='unigram' (the rest: sentencepiece's defaults, as in Python)
    char *argv[] = {"spm_train", "--input=txt.txt", model, vs, "--character_coverage=1.0", "--bos_id=-1", "--eos_id=-1",
                    "--model_type=unigram", NULL};
    int rc = ls_run(argv, dir, NULL, 0, NULL, NULL, e);
    if (rc) tk_err_hint(e, "a small training set cannot fill %d pieces: give a smaller --vocab-size or --spm MODEL", vocab);
    return rc;
}

int ls_spm_encode(const char *model, char *const *texts, size_t n, int32_t **ids, uint64_t **off, tk_err *e) {
    *ids = NULL;
    *off = NULL;
    TRY(ls_need_tool("spm_encode", "sentencepiece", e));
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += strlen(texts[i]) + 1;
    char *in = malloc(len + 1), *out = NULL;
    uint64_t *o = calloc(n + 1, sizeof *o);
    size_t cap = len + 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!in || !o || !v) {
        free(in), free(o), free(v);
        return tk_err_errno(e, ENOMEM, "spm_encode input");
    }
    char *p = in;
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s\n", texts[i]);
    char marg[4200];
    snprintf(marg, sizeof marg, "--model=%s", model);
    char *argv[] = {"spm_encode", marg, "--output_format=id", NULL};
    size_t outlen;
    int rc = ls_run(argv, NULL, in, len, &out, &outlen, e);
    free(in);
    if (rc == TK_EIO && !e->lib_code) { // spm_encode itself failed: the text is checked, so the model is bad
        e->code = rc = TK_EDATA;
        tk_err_where(e, "%s", model);
        tk_err_hint(e, "is it a sentencepiece .model file?");
    }
    const char *q = out;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *nl = strchr(q, '\n');
        if (!nl) {
            rc = tk_err_set(e, TK_EIO, "spm_encode gave %zu lines for %zu transcripts", i, n);
            break;
        }
        while (q < nl) {
            char *end;
            errno = 0;
            long id = strtol(q, &end, 10);
            if (end == q || errno || id < 0 || id > INT32_MAX || (*end != ' ' && end != nl)) {
                rc = tk_err_set(e, TK_EIO, "spm_encode: unexpected output on line %zu", i + 1);
                break;
            }
            if (k == cap) {
                int32_t *w = realloc(v, (cap *= 2) * sizeof *v);
                if (!w) {
                    rc = tk_err_errno(e, ENOMEM, "token ids");
                    break;
                }
                v = w;
            }
            v[k++] = (int32_t)id;
            q = end + (*end == ' ');
        }
        o[i + 1] = k;
        q = nl + 1;
    }
    free(out);
    if (rc) {
        free(v), free(o);
        return rc;
    }
    *ids = v;
    *off = o;
    return 0;
}
