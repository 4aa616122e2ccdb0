// The BERT vocabulary reader, basic tokenizer and WordPiece: expected tokens written by hand
// from the reference's rules (tokenization.py), and the errors bad vocabularies get.
#include <stdlib.h>
#include <string.h>

#include "bert/tokenizer.h"
#include "bert/unicode.h"
#include "tk_test.h"

static const char VOCAB[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
                            "un\n##aff\n##able\nhello\nworld\n,\n!\n.\n'\n[\n]\nmask\n"
                            "cafe\nnaive\n中\n##ing\nrun\na\n##a\nσας\ni\n";

typedef struct {
    bert_vocab *v;
    bert_tokenizer *t;
    bert_tok_ws ws;
    char out[4096];
} fixture;

static void setup(fixture *f, int max_word_chars) {
    memset(f, 0, sizeof *f);
    tk_err e;
    if (bert_vocab_parse(&f->v, VOCAB, strlen(VOCAB), "vocab.txt", &e) != 0) abort();
    bert_tok_opts o = {.max_word_chars = max_word_chars};
    if (bert_tokenizer_new(&f->t, f->v, &o, &e) != 0) abort();
}

static void teardown(fixture *f) {
    bert_tok_ws_free(&f->ws);
    bert_tokenizer_free(f->t);
    bert_vocab_free(f->v);
}

// The WordPiece tokens of s joined by spaces, or "ERR: what".
static const char *tok(fixture *f, const char *s) {
    bert_ids ids = {0};
    tk_err e;
    f->out[0] = '\0';
    if (bert_tokenize(f->t, &f->ws, s, strlen(s), &ids, &e) != 0) {
        snprintf(f->out, sizeof f->out, "ERR: %s", e.what);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < ids.n; i++)
            k += (size_t)snprintf(f->out + k, sizeof f->out - k, "%s%s", i ? " " : "", bert_vocab_token(f->v, ids.v[i]));
    }
    bert_ids_free(&ids);
    return f->out;
}

static int add_word(void *ctx, const char *w, size_t len, size_t nchars, tk_err *e) {
    (void)e;
    char *out = ctx;
    size_t k = strlen(out);
    snprintf(out + k, 4096 - k, "%s%.*s/%zu", k ? " " : "", (int)len, w, nchars);
    return 0;
}

// The basic tokens of s as "word/nchars ...".
static const char *basic(fixture *f, const char *s) {
    tk_err e;
    f->out[0] = '\0';
    if (bert_basic_tokenize(f->t, &f->ws, s, strlen(s), add_word, f->out, &e) != 0)
        snprintf(f->out, sizeof f->out, "ERR: %s", e.what);
    return f->out;
}

TK_TEST(wordpiece_greedy_longest_match) {
    fixture f;
    setup(&f, 0);
    CHECK_STR(tok(&f, "unaffable"), "un ##aff ##able");
    CHECK_STR(tok(&f, "runing"), "run ##ing");
    CHECK_STR(tok(&f, "running"), "[UNK]");          // "run" then no "##n...": greedy never backtracks
    CHECK_STR(tok(&f, "unaffablex"), "[UNK]");       // no piece for the tail: the whole word
    CHECK_STR(tok(&f, "xunaffable"), "[UNK]");       // no first piece
    CHECK_STR(tok(&f, "aaa"), "a ##a ##a");
    teardown(&f);
}

TK_TEST(basic_lower_punctuation_controls) {
    fixture f;
    setup(&f, 0);
    CHECK_STR(tok(&f, "Hello, WORLD!"), "hello , world !");
    CHECK_STR(tok(&f, "hel\x01lo"), "hello");         // a control character vanishes, joining
    CHECK_STR(tok(&f, "hel\x7flo wor\tld"), "hello [UNK] [UNK]"); // DEL removed; "wor", "ld" unknown
    CHECK_STR(tok(&f, "[MASK]"), "[ mask ]");        // special tokens in text are split as text
    CHECK_STR(tok(&f, "it's"), "[UNK] ' [UNK]");
    CHECK_STR(basic(&f, "  a\tb\r\nc  "), "a/1 b/1 c/1");
    CHECK_STR(basic(&f, "a\x0b" "b\x0c" "c"), "abc/3");  // \v \f are controls (Cc), not whitespace
    CHECK_STR(basic(&f, "$5^`~"), "$/1 5/1 ^/1 `/1 ~/1");
    CHECK_STR(basic(&f, ""), "");
    teardown(&f);
}

TK_TEST(basic_unicode_rules) {
    fixture f;
    setup(&f, 0);
    CHECK_STR(tok(&f, "Café naïve"), "cafe naive");                  // accents stripped
    CHECK_STR(tok(&f, "Cafe\xcc\x81"), "cafe");                       // a combining accent
    CHECK_STR(basic(&f, "ΣΑΣ Σ ΑΣ."), "σας/3 σ/1 ας/2 ./1");          // str.lower()'s final sigma
    CHECK_STR(basic(&f, "\xc4\xb0"), "i/1");                          // U+0130 -> i + U+0307 -> i
    CHECK_STR(basic(&f, "\xc7\x85"), "\xc7\x86/1");                   // titlecase DZ -> dz
    CHECK_STR(basic(&f, "\xed\x95\x9c"), "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab/3"); // 한 -> 3 jamo
    CHECK_STR(basic(&f, "x中文y"), "x/1 中/1 文/1 y/1");               // CJK stand alone
    CHECK_STR(basic(&f, "\xef\xa4\x80"), "\xe8\xb1\x88/1");           // U+F900 (CJK compat) -> U+8C48
    CHECK_STR(basic(&f, "a\xc2\xa0" "b\xe3\x80\x80" "c"), "a/1 b/1 c/1"); // NBSP, ideographic space
    CHECK_STR(basic(&f, "a\xe2\x80\xa8" "b"), "a/1 b/1");             // U+2028 splits (str.split)
    CHECK_STR(basic(&f, "a\xe2\x80\x8b" "b\xc2\xad" "c"), "abc/3");   // ZWSP, soft hyphen: Cf, removed
    CHECK_STR(basic(&f, "\xc2\xbf" "a\xe2\x80\x94"), "\xc2\xbf/1 a/1 \xe2\x80\x94/1"); // ¿ — punctuation
    CHECK_STR(basic(&f, "\xef\xbf\xbd" "a"), "a/1");                  // U+FFFD removed
    CHECK_STR(basic(&f, "\xcc\x81"), "");                             // only an accent: nothing
    CHECK_STR(tok(&f, "中"), "中");
    CHECK_STR(tok(&f, "文"), "[UNK]");
    teardown(&f);
}

TK_TEST(long_words_become_unk) {
    fixture f;
    char w[260];
    setup(&f, 0);
    memset(w, 'a', 201);
    w[201] = '\0';
    CHECK_STR(tok(&f, w), "[UNK]");                  // 201 > 200, the reference's limit
    w[200] = '\0';
    tok(&f, w);
    CHECK_EQ_INT(strlen(f.out), 1 + 199 * 4);        // "a" then 199 x " ##a"
    teardown(&f);
    setup(&f, 100);                                  // Hugging Face's limit
    w[101] = '\0';
    memset(w, 'a', 101);
    CHECK_STR(tok(&f, w), "[UNK]");
    teardown(&f);
}

TK_TEST(invalid_utf8_is_an_error) {
    fixture f;
    setup(&f, 0);
    CHECK_STR(tok(&f, "ok \xff"), "ERR: invalid UTF-8 at byte 3");
    CHECK_STR(tok(&f, "ab\xc3"), "ERR: invalid UTF-8 at byte 2");        // truncated sequence
    CHECK_STR(tok(&f, "\xc0\xaf"), "ERR: invalid UTF-8 at byte 0");      // overlong
    CHECK_STR(tok(&f, "x\xed\xa0\x80"), "ERR: invalid UTF-8 at byte 1"); // a surrogate
    CHECK_STR(tok(&f, "\xf4\x90\x80\x80"), "ERR: invalid UTF-8 at byte 0"); // past U+10FFFF
    teardown(&f);
}

TK_TEST(blank_lines) {
    CHECK(bert_line_is_blank("", 0));
    CHECK(bert_line_is_blank(" \t\r\x0b\x0c\x1c", 6));
    CHECK(bert_line_is_blank("\xc2\xa0\xe3\x80\x80", 5));    // NBSP, ideographic space: str.isspace
    CHECK(!bert_line_is_blank("\xe2\x80\x8b", 3));           // ZWSP is not whitespace for Python
    CHECK(!bert_line_is_blank(" x ", 3));
    CHECK(!bert_line_is_blank("\xff", 1));
}

static const char *vocab_error(const char *text) {
    static char buf[1024];
    bert_vocab *v;
    tk_err e;
    if (bert_vocab_parse(&v, text, strlen(text), "v.txt", &e) == 0) {
        bert_special sp;
        int rc = bert_vocab_special(v, &sp, &e);
        bert_vocab_free(v);
        if (rc == 0) return "ok";
    }
    snprintf(buf, sizeof buf, "%d %s: %s", e.code, e.where, e.what);
    return buf;
}

TK_TEST(vocab_errors) {
    CHECK_STR(vocab_error("[UNK]\n[CLS]\n[SEP]\n[MASK]\n"), "ok");
    CHECK_STR(vocab_error("[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]"), "ok"); // CRLF, no final newline
    CHECK_STR(vocab_error("[UNK]\n\n[CLS]\n"), "3 v.txt: line 2: empty line");
    CHECK_STR(vocab_error("[UNK]\nhello world\n"), "3 v.txt: line 2: 'hello world' is not one token (it contains whitespace)");
    CHECK_STR(vocab_error("[UNK]\n tab\n"), "3 v.txt: line 2: ' tab' is not one token (it contains whitespace)");
    CHECK_STR(vocab_error("a\nb\na\n"), "3 v.txt: line 3: token 'a' repeats line 1");
    CHECK_STR(vocab_error("a\n##b\n##b\n"), "3 v.txt: line 3: token '##b' repeats line 2");
    CHECK_STR(vocab_error("ok\nbad\xff\n"), "3 v.txt: line 2: invalid UTF-8 at byte 3");
    CHECK_STR(vocab_error(""), "3 v.txt: line 1: empty vocabulary");
    CHECK_STR(vocab_error("[UNK]\n[CLS]\n[SEP]\n"), "3 v.txt: the vocabulary has no [MASK] token");
}

TK_TEST(vocab_ids_and_tokens) {
    bert_vocab *v;
    tk_err e;
    CHECK_EQ_INT(bert_vocab_parse(&v, VOCAB, strlen(VOCAB), "vocab.txt", &e), 0);
    CHECK_EQ_INT(bert_vocab_size(v), 26);
    CHECK_EQ_INT(bert_vocab_id(v, "##aff", 5), 6);
    CHECK_EQ_INT(bert_vocab_id(v, "aff", 3), -1);
    CHECK_EQ_INT(bert_vocab_id(v, "[MASK]", 6), 4);
    CHECK_STR(bert_vocab_token(v, 7), "##able");
    bert_special sp;
    CHECK_EQ_INT(bert_vocab_special(v, &sp, &e), 0);
    CHECK_EQ_INT(sp.pad, 0);
    CHECK_EQ_INT(sp.unk, 1);
    CHECK_EQ_INT(sp.cls, 2);
    CHECK_EQ_INT(sp.sep, 3);
    CHECK_EQ_INT(sp.mask, 4);
    bert_vocab_free(v);
}

TK_TEST(unicode_tables) {
    uint32_t out[4];
    CHECK_EQ_INT(bert_lower_char(0x130, out), 2);   // İ -> i + combining dot
    CHECK_EQ_INT(out[0], 'i');
    CHECK_EQ_INT(out[1], 0x307);
    CHECK_EQ_INT(bert_nfd_char(0x1F82, out), 4);    // ᾂ -> α + 0313 + 0300 + 0345
    CHECK_EQ_INT(out[0], 0x3B1);
    CHECK_EQ_INT(out[3], 0x345);
    CHECK_EQ_INT(bert_nfd_char(0xAC00, out), 2);    // 가 -> ᄀ ᅡ
    CHECK_EQ_INT(bert_nfd_char(0xD7A3, out), 3);    // 힣 -> ᄒ ᅵ ᇂ
    CHECK_EQ_INT(out[2], 0x11C2);
    CHECK_EQ_INT(bert_ccc(0x301), 230);
    CHECK((bert_uclass(0x3000) & BU_WS) && (bert_uclass(0x200B) & BU_CTRL) && (bert_uclass(0xBF) & BU_PUNCT));
    CHECK((bert_uclass(0x4E00) & BU_CJK) && !(bert_uclass(0x3042) & BU_CJK)); // hiragana is not
    // Canonical reordering: 0x0301 (230) then 0x0316 (220) sort to 0x0316 0x0301 before the
    // marks are dropped; the result keeps only the base letter either way.
    uint32_t in[3] = {'e', 0x301, 0x316}, st[16];
    CHECK_EQ_INT(bert_strip_accents(in, 3, st), 1);
    CHECK_EQ_INT(st[0], 'e');
}
