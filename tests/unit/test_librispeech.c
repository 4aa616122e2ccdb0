// lib/librispeech's small readers on exact cases: the transcript alphabet (the reference's
// text.lower().strip() into the tokenizer's labels), trans.txt lines, WAV headers, and the
// synthetic sentences (LibriSpeech's normalization, reproducible from the seed).
#include <stdint.h>
#include <string.h>

#include "librispeech/librispeech.h"
#include "tk_test.h"

TK_TEST(text_lower_cased_and_stripped_like_python) {
    char out[64];
    size_t bad = 99;
    CHECK_EQ_INT(ls_text_normalize(" \tIT'S A Cat\r\n", 14, out, &bad), 0);
    CHECK_STR(out, "it's a cat");
    CHECK_EQ_INT(ls_text_normalize("", 0, out, &bad), 0);
    CHECK_STR(out, "");
    CHECK_EQ_INT(ls_text_normalize("A  B", 4, out, &bad), 0); // inner spaces stay: sentencepiece folds them
    CHECK_STR(out, "a  b");
}

TK_TEST(text_outside_the_labels_gives_the_offset) {
    char out[64];
    size_t bad = 99;
    CHECK_EQ_INT(ls_text_normalize("HELLO, WORLD", 12, out, &bad), -1);
    CHECK_EQ_INT((int)bad, 5);
    CHECK_EQ_INT(ls_text_normalize(" 1", 2, out, &bad), -1);
    CHECK_EQ_INT((int)bad, 1);
    CHECK_EQ_INT(ls_text_normalize("CAF\xc3\x89", 5, out, &bad), -1);
    CHECK_EQ_INT((int)bad, 3);
    CHECK_EQ_INT(ls_text_normalize("A\tB", 3, out, &bad), -1); // a tab inside is not a label
    CHECK_EQ_INT((int)bad, 1);
}

TK_TEST(trans_lines_split_at_the_first_space) {
    const char *f = "19-198-0000 NORTHANGER ABBEY\n19-198-0001  TWO SPACES\r\n19-198-0002 A\n19-198-0003 LAST";
    ls_trans t;
    tk_err e;
    CHECK_EQ_INT(ls_trans_parse(f, strlen(f), "x.trans.txt", "19-198-", &t, &e), 0);
    CHECK_EQ_INT((int)t.n, 4);
    CHECK_STR(t.u[0].id, "19-198-0000");
    CHECK_STR(t.u[0].text, "northanger abbey");
    CHECK_STR(t.u[1].text, "two spaces"); // partition(' ') then strip()
    CHECK_STR(t.u[2].text, "a");
    CHECK_STR(t.u[3].text, "last");
    CHECK_EQ_INT((int)t.u[3].line, 4);
    ls_trans_free(&t);
}

TK_TEST(trans_errors_name_file_line_and_column) {
    ls_trans t;
    tk_err e;
    const char *a = "19-198-0000 A\n19-198-0001 B!\n";
    CHECK_EQ_INT(ls_trans_parse(a, strlen(a), "x.trans.txt", NULL, &t, &e), TK_EDATA);
    CHECK_STR(e.where, "x.trans.txt: line 2, column 14");
    const char *b = "19-198-0000 A\n\n";
    CHECK_EQ_INT(ls_trans_parse(b, strlen(b), "x.trans.txt", NULL, &t, &e), TK_EDATA);
    CHECK_STR(e.where, "x.trans.txt: line 2");
    // an id alone (the reference would read an empty transcript: a label-free utterance) or with
    // spaces only: bad input, as the list asks
    const char *b2 = "19-198-0000 A\n19-198-0001\n";
    CHECK_EQ_INT(ls_trans_parse(b2, strlen(b2), "x.trans.txt", NULL, &t, &e), TK_EDATA);
    CHECK_STR(e.where, "x.trans.txt: line 2");
    CHECK_STR(e.what, "utterance 19-198-0001 has an empty transcript");
    const char *b4 = "19-198-0000   \r\n";
    CHECK_EQ_INT(ls_trans_parse(b4, strlen(b4), "x.trans.txt", NULL, &t, &e), TK_EDATA);
    CHECK_STR(e.where, "x.trans.txt: line 1");
    const char *c = "19-198-00x0 A\n";
    CHECK_EQ_INT(ls_trans_parse(c, strlen(c), "x.trans.txt", NULL, &t, &e), TK_EDATA);
    const char *d = "19-198-0000 A\n19-1980-0001 B\n";
    CHECK_EQ_INT(ls_trans_parse(d, strlen(d), "x.trans.txt", NULL, &t, &e), 0); // no prefix: any valid id
    ls_trans_free(&t);
    CHECK_EQ_INT(ls_trans_parse(d, strlen(d), "x.trans.txt", "19-198-", &t, &e), TK_EDATA);
    CHECK_STR(e.where, "x.trans.txt: line 2");
}

static size_t wav(uint8_t *p, uint32_t rate, uint16_t ch, uint16_t bits, uint32_t data_len, size_t nbytes) {
    memcpy(p, "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0", 22);
    p[22] = (uint8_t)ch, p[23] = 0;
    for (int i = 0; i < 4; i++) p[24 + i] = (uint8_t)(rate >> (8 * i));
    memset(p + 28, 0, 6);
    p[34] = (uint8_t)bits, p[35] = 0;
    memcpy(p + 36, "data", 4);
    for (int i = 0; i < 4; i++) p[40 + i] = (uint8_t)(data_len >> (8 * i));
    for (size_t i = 0; i < nbytes; i++) p[44 + i] = (uint8_t)(i * 37 + 1);
    return 44 + nbytes;
}

TK_TEST(wav_samples_little_endian_and_format_checked) {
    uint8_t p[64];
    ls_audio a;
    tk_err e;
    size_t n = wav(p, 16000, 1, 16, 4, 4); // bytes 01 26 4b 70: samples 0x2601, 0x704b
    CHECK_EQ_INT(ls_wav_parse(p, n, "a.wav", &a, &e), 0);
    CHECK_EQ_INT((int)a.n, 2);
    CHECK_EQ_INT(a.pcm[0], 0x2601);
    CHECK_EQ_INT(a.pcm[1], 0x704b);
    ls_audio_free(&a);
    n = wav(p, 16000, 1, 16, 8, 4); // says 8 bytes, holds 4
    CHECK_EQ_INT(ls_wav_parse(p, n, "a.wav", &a, &e), TK_EDATA);
    CHECK(strstr(e.what, "truncated") != NULL);
    n = wav(p, 8000, 1, 16, 4, 4);
    CHECK_EQ_INT(ls_wav_parse(p, n, "a.wav", &a, &e), TK_EDATA);
    CHECK_STR(e.what, "8000 Hz, 1 channel, 16 bits: LibriSpeech audio is 16000 Hz mono 16-bit");
    CHECK_STR(e.where, "a.wav");
}

// --lexicon N: five words, DET NOUN VERB DET NOUN, each of its class's first N (the lists as
// written here, from synth.c's grammar); reproducible; N words a class are all used.
TK_TEST(synthetic_short_sentences_from_a_small_lexicon) {
    static const char *const cls[3][3] = {{"THE", "A", "HIS"}, {"MAN", "WOMAN", "CHILD"}, {"SAW", "FOUND", "LEFT"}};
    static const int pos[5] = {0, 1, 2, 0, 1};
    int used[3][3] = {{0}};
    char a[256], b[256], c[256];
    for (uint64_t i = 0; i < 200; i++) {
        ls_synth_short_sentence(5, 1, i, 3, a, sizeof a);
        ls_synth_short_sentence(5, 1, i, 3, b, sizeof b);
        CHECK_STR(a, b);
        char *save = NULL, *w = strtok_r(a, " ", &save);
        int k = 0;
        for (; w; w = strtok_r(NULL, " ", &save), k++) {
            CHECK(k < 5);
            if (k >= 5) break;
            int found = -1;
            for (int j = 0; j < 3; j++)
                if (!strcmp(w, cls[pos[k]][j])) found = j;
            CHECK(found >= 0);
            if (found >= 0) used[pos[k]][found] = 1;
        }
        CHECK_EQ_INT(k, 5);
    }
    for (int x = 0; x < 3; x++)
        for (int j = 0; j < 3; j++) CHECK(used[x][j]);
    // another stream (dev's) says other sentences; 2 words a class still gives five words
    int same = 0;
    for (uint64_t i = 0; i < 50; i++) {
        ls_synth_short_sentence(5, 1, i, 3, a, sizeof a);
        ls_synth_short_sentence(5, 2, i, 3, c, sizeof c);
        same += !strcmp(a, c);
    }
    CHECK(same < 10);
    ls_synth_short_sentence(5, 1, 0, 2, a, sizeof a);
    CHECK(!strncmp(a, "THE ", 4) || !strncmp(a, "A ", 2));
}

TK_TEST(synthetic_sentences_normalized_and_reproducible) {
    char a[1024], b[1024], c[1024];
    int same = 0;
    for (uint64_t i = 0; i < 200; i++) {
        ls_synth_sentence(7, 1, i, a, sizeof a);
        ls_synth_sentence(7, 1, i, b, sizeof b);
        ls_synth_sentence(7, 2, i, c, sizeof c);
        CHECK_STR(a, b);
        same += !strcmp(a, c); // another stream (dev's), other sentences: short ones may meet
        size_t bad;
        char norm[1024];
        CHECK(a[0] >= 'A' && a[0] <= 'Z' && a[strlen(a) - 1] != ' ');
        CHECK_EQ_INT(ls_text_normalize(a, strlen(a), norm, &bad), 0);
        for (const char *p = a; *p; p++) CHECK((*p >= 'A' && *p <= 'Z') || *p == '\'' || *p == ' ');
        CHECK(strstr(a, "  ") == NULL);
    }
    CHECK(same < 10);
}
