// LibriSpeech transcripts (librispeech.h): {speaker}-{chapter}.trans.txt files and the alphabet
// the reference's tokenizer accepts.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "librispeech/librispeech.h"

// Python's str.strip() whitespace for ASCII
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int ls_text_normalize(const char *s, size_t n, char *out, size_t *bad) {
    size_t a = 0, b = n;
    while (a < b && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || c == '\'' || c == ' ')) {
            *bad = i;
            return -1;
        }
        out[k++] = c;
    }
    out[k] = 0;
    return 0;
}

int ls_read_file(const char *path, char **buf, size_t *len, tk_err *e) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return tk_err_set(e, TK_EIO, "%s: not a regular file", path);
    }
    if (sb.st_size > (1LL << 30)) {
        fclose(f);
        return tk_err_set(e, TK_EDATA, "%s: over 1 GiB", path);
    }
    char *p = malloc((size_t)sb.st_size + 1);
    if (!p) {
        fclose(f);
        return tk_err_errno(e, ENOMEM, "%s", path);
    }
    size_t got = fread(p, 1, (size_t)sb.st_size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != (size_t)sb.st_size) {
        free(p);
        return tk_err_errno(e, EIO, "%s: read failed", path);
    }
    p[got] = 0;
    *buf = p;
    *len = got;
    return 0;
}

void ls_trans_free(ls_trans *t) {
    free(t->u);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

static int digits(const char *s, size_t n) {
    if (!n || n > 18) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

// "digits-digits-digits"
static int valid_id(const char *s, size_t n) {
    const char *d1 = memchr(s, '-', n);
    if (!d1) return 0;
    const char *d2 = memchr(d1 + 1, '-', n - (size_t)(d1 + 1 - s));
    if (!d2) return 0;
    return digits(s, (size_t)(d1 - s)) && digits(d1 + 1, (size_t)(d2 - d1 - 1)) &&
           digits(d2 + 1, n - (size_t)(d2 + 1 - s));
}

int ls_trans_parse(const char *data, size_t n, const char *name, const char *prefix, ls_trans *t, tk_err *e) {
    memset(t, 0, sizeof *t);
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += data[i] == '\n';
    t->buf = malloc(n + 1);
    t->u = calloc(lines, sizeof *t->u);
    if (!t->buf || !t->u) {
        ls_trans_free(t);
        return tk_err_errno(e, ENOMEM, "%s", name);
    }
    size_t pos = 0, lineno = 0;
    int rc = 0;
    while (pos < n && !rc) {
        const char *l = data + pos, *nl = memchr(l, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - l) : n - pos;
        lineno++;
        const char *z = memchr(l, 0, len);
        const char *sp = memchr(l, ' ', len);
        size_t idlen = sp ? (size_t)(sp - l) : len;
        if (z) {
            rc = tk_err_set(e, TK_EDATA, "a NUL byte in the transcript file");
            tk_err_where(e, "%s: line %zu, column %zu", name, lineno, (size_t)(z - l) + 1);
        } else if (!idlen) {
            rc = tk_err_set(e, TK_EDATA, "a line without an utterance id (expected \"SPEAKER-CHAPTER-NNNN TRANSCRIPT\")");
            tk_err_where(e, "%s: line %zu", name, lineno);
        } else if (!valid_id(l, idlen) || idlen >= sizeof t->u[0].id) {
            rc = tk_err_set(e, TK_EDATA, "'%.*s' is not an utterance id SPEAKER-CHAPTER-NNNN", (int)(idlen > 64 ? 64 : idlen), l);
            tk_err_where(e, "%s: line %zu", name, lineno);
        } else if (prefix && (idlen <= strlen(prefix) || strncmp(l, prefix, strlen(prefix)) != 0)) {
            rc = tk_err_set(e, TK_EDATA, "utterance id '%.*s' is not of this file's speaker and chapter (%s...)", (int)idlen, l, prefix);
            tk_err_where(e, "%s: line %zu", name, lineno);
        } else {
            ls_utt *u = &t->u[t->n];
            memcpy(u->id, l, idlen);
            u->id[idlen] = 0;
            u->line = (uint32_t)lineno;
            u->text = t->buf + pos;
            size_t bad, off = sp ? idlen + 1 : len; // the reference's line.partition(' ')
            if (ls_text_normalize(l + off, len - off, u->text, &bad)) {
                unsigned char c = (unsigned char)l[off + bad];
                char shown[8];
                snprintf(shown, sizeof shown, c > 0x20 && c < 0x7f ? "'%c'" : "0x%02X", c);
                rc = tk_err_set(e, TK_EDATA, "character %s is not in the transcripts' alphabet (letters, apostrophe, "
                                "space)", shown);
                tk_err_where(e, "%s: line %zu, column %zu", name, lineno, off + bad + 1);
            } else if (!u->text[strspn(u->text, " ")]) { // (LibriSpeech has none; a label-free utterance trains nothing)
                rc = tk_err_set(e, TK_EDATA, "utterance %s has an empty transcript", u->id);
                tk_err_where(e, "%s: line %zu", name, lineno);
            }
            for (size_t j = 0; j < t->n && !rc; j++)
                if (strcmp(t->u[j].id, u->id) == 0) {
                    rc = tk_err_set(e, TK_EDATA, "utterance %s is listed twice (first on line %u)", u->id, t->u[j].line);
                    tk_err_where(e, "%s: line %zu", name, lineno);
                }
            if (!rc) t->n++;
        }
        pos += len + (nl != NULL);
    }
    if (rc) ls_trans_free(t);
    return rc;
}

int ls_trans_load(const char *path, const char *prefix, ls_trans *t, tk_err *e) {
    memset(t, 0, sizeof *t);
    char *buf;
    size_t n;
    TRY(ls_read_file(path, &buf, &n, e));
    int rc = ls_trans_parse(buf, n, path, prefix, t, e);
    free(buf);
    return rc;
}
