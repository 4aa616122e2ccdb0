// Fuzz prep librispeech's readers of LibriSpeech's own files: a SPEAKER-CHAPTER.trans.txt
// (ls_trans_parse, with and without the file's id prefix) and a WAV file of the reference's
// converted tree (ls_wav_parse). Any input must parse or give a TK_EDATA error naming the file,
// never crash; a parsed transcript file has valid, unique ids (with the prefix when one is given)
// and transcripts of the tokenizer's alphabet only; a parsed WAV holds whole samples within the
// input.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "librispeech/librispeech.h"

static void check_trans(const uint8_t *data, size_t size, const char *prefix) {
    tk_err e;
    ls_trans t;
    if (ls_trans_parse((const char *)data, size, "fuzz.trans.txt", prefix, &t, &e) == 0) {
        for (size_t i = 0; i < t.n; i++) {
            if (!t.u[i].id[0] || (prefix && strncmp(t.u[i].id, prefix, strlen(prefix)))) abort();
            for (const char *c = t.u[i].text; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || *c == '\'' || *c == ' ')) abort();
            for (size_t j = 0; j < i; j++)
                if (!strcmp(t.u[i].id, t.u[j].id)) abort();
        }
        ls_trans_free(&t);
    } else if (e.code != TK_EDATA && e.code != TK_EIO) {
        abort();
    } else if (e.code == TK_EDATA && !strstr(e.where, "fuzz.trans.txt")) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_trans(data, size, NULL);
    check_trans(data, size, "19-198-");
    tk_err e;
    ls_audio a;
    if (ls_wav_parse(data, size, "fuzz.wav", &a, &e) == 0) {
        if (a.n * 2 > size) abort();
        ls_audio_free(&a);
    } else if (e.code != TK_EDATA && e.code != TK_EIO) {
        abort();
    } else if (e.code == TK_EDATA && !strstr(e.what, "fuzz.wav") && !strstr(e.where, "fuzz.wav")) {
        abort();
    }
    return 0;
}
