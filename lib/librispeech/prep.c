// prep librispeech (librispeech.h): subset folders or the reference's manifests -> .tks records.
// Pass 1 reads every transcript and checks the tree (cheap: text only), the tokenizer is trained
// and run once over all transcripts, pass 2 decodes the audio one utterance at a time and writes.
// Every output is a temporary until everything has succeeded.
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "librispeech/librispeech.h"
#include "tks/tks.h"

typedef struct {
    char id[64];
    char *text;                       // normalized transcript
    char *audio;                      // path of the FLAC (folders) or WAV (manifests)
    char rel[96];                     // "{speaker}/{chapter}" (folders)
    char where[600];                  // "FILE: line N" / "FILE: $[i]": for errors about it
    uint64_t expect;                  // manifests: original_num_samples
    double duration;                  // manifests: original_duration
} utt;

typedef struct {
    ls_subset_stats *st;
    utt *u;
    size_t n, cap;
} subset;

static int add_utt(subset *s, utt **out, tk_err *e) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        utt *p = realloc(s->u, cap * sizeof *p);
        if (!p) return tk_err_errno(e, ENOMEM, "utterances");
        s->u = p;
        s->cap = cap;
    }
    *out = memset(&s->u[s->n++], 0, sizeof(utt));
    return 0;
}

static void subset_free(subset *s) {
    for (size_t i = 0; i < s->n; i++) free(s->u[i].text), free(s->u[i].audio);
    free(s->u);
}

// ---- pass 1: folders -------------------------------------------------------------------------
typedef struct { char **v; size_t n; } names;

static void names_free(names *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static int cmp_num(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t lx = strlen(x), ly = strlen(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int all_digits(const char *s) {
    if (!*s || strlen(s) > 18) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

// The entries of dir: numeric sub-folders (dirs = 1, sorted by number) or files ending in suffix
// (sorted by name).
static int list_dir(const char *dir, int dirs, const char *suffix, names *out, tk_err *e) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return tk_err_errno(e, errno, "%s: cannot open the folder", dir);
    size_t cap = 0;
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        const char *nm = de->d_name;
        char path[8192];
        (void)ls_path(path, sizeof path, NULL, "%s/%s", dir, nm);
        struct stat sb;
        if (nm[0] == '.' || stat(path, &sb) != 0) continue;
        if (dirs ? !(S_ISDIR(sb.st_mode) && all_digits(nm))
                 : !(S_ISREG(sb.st_mode) && strlen(nm) > strlen(suffix) && !strcmp(nm + strlen(nm) - strlen(suffix), suffix)))
            continue;
        if (out->n == cap) {
            char **v = realloc(out->v, (cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!v) {
                rc = tk_err_errno(e, ENOMEM, "%s", dir);
                break;
            }
            out->v = v;
        }
        if (!(out->v[out->n] = strdup(nm))) rc = tk_err_errno(e, ENOMEM, "%s", dir);
        else out->n++;
    }
    closedir(d);
    if (!rc && out->n) qsort(out->v, out->n, sizeof *out->v, dirs ? cmp_num : cmp_str);
    if (rc) names_free(out);
    return rc;
}

// One chapter folder: its trans.txt, and a FLAC file for each line and a line for each FLAC file.
static int scan_chapter(subset *s, const char *dir, const char *spk, const char *ch, tk_err *e) {
    char trans[8192], prefix[64];
    (void)ls_path(trans, sizeof trans, NULL, "%s/%s-%s.trans.txt", dir, spk, ch);
    snprintf(prefix, sizeof prefix, "%s-%s-", spk, ch);
    if (access(trans, F_OK) != 0) {
        tk_err_set(e, TK_EDATA, "the chapter has no transcript file %s-%s.trans.txt", spk, ch);
        return tk_err_where(e, "%s", dir);
    }
    ls_trans t;
    TRY(ls_trans_load(trans, prefix, &t, e));
    names fl;
    int rc = list_dir(dir, 0, ".flac", &fl, e);
    char *seen = rc ? NULL : calloc(fl.n + 1, 1);
    if (!rc && !seen) rc = tk_err_errno(e, ENOMEM, "%s", dir);
    for (size_t i = 0; i < t.n && !rc; i++) {
        char want[80];
        snprintf(want, sizeof want, "%s.flac", t.u[i].id);
        char *key = want, **hit = fl.n ? bsearch(&key, fl.v, fl.n, sizeof *fl.v, cmp_str) : NULL;
        if (!hit) {
            rc = tk_err_set(e, TK_EDATA, "utterance %s has no audio file %s in the chapter's folder", t.u[i].id, want);
            tk_err_where(e, "%s: line %u", trans, t.u[i].line);
            break;
        }
        seen[hit - fl.v] = 1;
        utt *u;
        if ((rc = add_utt(s, &u, e))) break;
        snprintf(u->id, sizeof u->id, "%s", t.u[i].id);
        (void)ls_path(u->rel, sizeof u->rel, NULL, "%s/%s", spk, ch);
        (void)ls_path(u->where, sizeof u->where, NULL, "%s: line %u", trans, t.u[i].line);
        size_t pl = strlen(dir) + strlen(want) + 2;
        u->text = strdup(t.u[i].text);
        u->audio = malloc(pl);
        if (!u->text || !u->audio) rc = tk_err_errno(e, ENOMEM, "%s", trans);
        else snprintf(u->audio, pl, "%s/%s", dir, want);
    }
    for (size_t i = 0; i < fl.n && !rc; i++)
        if (!seen[i]) {
            rc = tk_err_set(e, TK_EDATA, "the audio file is not listed in %s-%s.trans.txt", spk, ch);
            tk_err_where(e, "%s/%s", dir, fl.v[i]);
        }
    free(seen);
    names_free(&fl);
    ls_trans_free(&t);
    return rc;
}

static int scan_folder(subset *s, const char *root, tk_err *e) {
    names spk;
    TRY(list_dir(root, 1, NULL, &spk, e));
    int rc = 0;
    if (!spk.n) {
        rc = tk_err_set(e, TK_EDATA, "no speaker folders (a LibriSpeech subset holds SPEAKER/CHAPTER/ folders)");
        tk_err_where(e, "%s", root);
    }
    for (size_t i = 0; i < spk.n && !rc; i++) {
        char sdir[8192];
        (void)ls_path(sdir, sizeof sdir, NULL, "%s/%s", root, spk.v[i]);
        names ch;
        if ((rc = list_dir(sdir, 1, NULL, &ch, e))) break;
        for (size_t j = 0; j < ch.n && !rc; j++) {
            char cdir[8192];
            (void)ls_path(cdir, sizeof cdir, NULL, "%s/%s", sdir, ch.v[j]);
            rc = scan_chapter(s, cdir, spk.v[i], ch.v[j], e);
        }
        names_free(&ch);
    }
    names_free(&spk);
    return rc;
}

// ---- pass 1: manifests -----------------------------------------------------------------------
static int scan_manifest(subset *s, const char *path, const char *root, tk_err *e) {
    ls_manifest_entry *m;
    size_t n;
    TRY(ls_manifest_load(path, &m, &n, e));
    char dir[4096];
    if (root) (void)ls_path(dir, sizeof dir, NULL, "%s", root);
    else {
        const char *sl = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - path) : 1, sl ? path : ".");
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        utt *u;
        if ((rc = add_utt(s, &u, e))) break;
        const char *base = strrchr(m[i].fname, '/');
        base = base ? base + 1 : m[i].fname;
        size_t bl = strlen(base);
        if (bl > 4 && !strcmp(base + bl - 4, ".wav")) bl -= 4;
        snprintf(u->id, sizeof u->id, "%.*s", (int)(bl < 63 ? bl : 63), base);
        (void)ls_path(u->where, sizeof u->where, NULL, "%s: $[%zu]", path, i);
        u->expect = m[i].num_samples;
        u->duration = m[i].duration;
        size_t tl = strlen(m[i].transcript), bad, pl = strlen(dir) + strlen(m[i].fname) + 2;
        u->text = malloc(tl + 1);
        u->audio = malloc(pl);
        if (!u->text || !u->audio) {
            rc = tk_err_errno(e, ENOMEM, "%s", path);
            break;
        }
        snprintf(u->audio, pl, "%s/%s", dir, m[i].fname);
        if (ls_text_normalize(m[i].transcript, tl, u->text, &bad)) {
            unsigned char c = (unsigned char)m[i].transcript[bad];
            rc = tk_err_set(e, TK_EDATA, "character %s%c%s0x%02X is not in the transcripts' alphabet (letters, apostrophe, "
                            "space)", c > 0x20 && c < 0x7f ? "'" : "", c > 0x20 && c < 0x7f ? c : ' ',
                            c > 0x20 && c < 0x7f ? "' " : "", c);
            tk_err_where(e, "%s: $[%zu].transcript, offset %zu", path, i, bad);
        } else if (!u->text[strspn(u->text, " ")]) { // as a trans.txt line's (text.c)
            rc = tk_err_set(e, TK_EDATA, "an empty transcript");
            tk_err_where(e, "%s: $[%zu].transcript", path, i);
        }
    }
    ls_manifest_free(m, n);
    return rc;
}

// "librispeech-train-clean-100-wav.json" -> "train-clean-100"; a folder "a/b/dev-clean/" -> "dev-clean"
static void subset_name(const char *in, int manifest, char *out, size_t cap) {
    size_t n = strlen(in);
    while (n > 1 && in[n - 1] == '/') n--;
    size_t b = n;
    while (b && in[b - 1] != '/') b--;
    const char *s = in + b;
    size_t len = n - b;
    if (manifest) {
        if (len > 5 && !strncmp(s + len - 5, ".json", 5)) len -= 5;
        if (len > 4 && !strncmp(s + len - 4, "-wav", 4)) len -= 4;
        if (len > 12 && !strncmp(s, "librispeech-", 12)) s += 12, len -= 12;
    }
    snprintf(out, cap, "%.*s", (int)len, s);
}

// ---- outputs ---------------------------------------------------------------------------------
enum { F_ID, F_PCM, F_RATE, F_TEXT, F_TOKENS, NF };

static void schema(tks_schema *s, const ls_subset_stats *st, const char *model, int vocab) {
    memset(s, 0, sizeof *s);
    static const struct { const char *name; tks_dtype t; int ragged; } f[NF] = {
        {"id", TKS_U8, 1}, {"pcm", TKS_I16, 1}, {"sample_rate", TKS_I32, 0}, {"transcript", TKS_U8, 1},
        {"tokens", TKS_I32, 1}};
    for (int i = 0; i < NF; i++) {
        snprintf(s->f[i].name, sizeof s->f[i].name, "%s", f[i].name);
        s->f[i].dtype = f[i].t;
        s->f[i].ndim = f[i].ragged;
        if (f[i].ragged) s->f[i].shape[0] = TKS_RAGGED;
    }
    s->nfields = NF;
    const char *b = strrchr(model, '/');
    json_t *m = json_pack("{s:s,s:s,s:s,s:i,s:o,s:s,s:o,s:s}", "source", "librispeech", "subset", st->name, "split",
                          st->train ? "train" : "eval", "sample_rate", LS_SAMPLE_RATE, "max_duration",
                          st->train ? json_real(LS_MAX_DURATION) : json_null(), "spm_model", b ? b + 1 : model,
                          "vocab_size", vocab ? json_integer(vocab) : json_null(), "transcript", "lower case, stripped: the reference manifest's");
    char *txt = m ? json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    snprintf(s->meta_json, sizeof s->meta_json, "%s", txt && strlen(txt) < sizeof s->meta_json ? txt : "{}");
    free(txt);
    json_decref(m);
}

// The reference's manifest entry for a converted utterance (preprocessing_utils.py: sox's file
// info, fname and speed; bitrate and silent, which nothing reads, are left out).
static json_t *manifest_entry(const subset *s, const utt *u, size_t n) {
    char fname[512];
    snprintf(fname, sizeof fname, "%s-wav/%s/%s.wav", s->st->name, u->rel, u->id);
    double dur = (double)n / LS_SAMPLE_RATE;
    return json_pack("{s:s,s:[{s:i,s:f,s:i,s:f,s:I,s:s,s:s,s:i}],s:f,s:I}", "transcript", u->text, "files", "channels", 1,
                     "sample_rate", (double)LS_SAMPLE_RATE, "bitdepth", 16, "duration", dur, "num_samples",
                     (json_int_t)n, "encoding", "Signed Integer PCM", "fname", fname, "speed", 1, "original_duration",
                     dur, "original_num_samples", (json_int_t)n);
}

static int write_text(const char *path, const char *text, tk_err *e) {
    tk_afile af;
    TRY(tk_afile_open(&af, path, e));
    int rc = tk_write_all(af.fp, text, strlen(text), path, e);
    if (!rc) rc = tk_afile_commit(&af, e);
    else tk_afile_abort(&af);
    return rc;
}

// Pass 2, one utterance whose audio is decoded: filter, append; the manifest entry and WAV of
// folder input.
static int write_utt(subset *s, size_t i, ls_audio *a, const int32_t *tk, size_t ntk, const ls_prep_opts *o,
                     const char *wav_dir, json_t *man, tks_writer *w, tk_err *e) {
    utt *u = &s->u[i];
    if (o->manifests && a->n != u->expect) {
        tk_err_set(e, TK_EDATA, "%s holds %zu samples, the manifest says %llu", u->audio, a->n,
                   (unsigned long long)u->expect);
        return tk_err_where(e, "%s.original_num_samples", u->where);
    }
    double dur = o->manifests ? u->duration : (double)a->n / LS_SAMPLE_RATE;
    s->st->utterances++;
    if (man) {
        json_t *ent = manifest_entry(s, u, a->n);
        if (!ent || json_array_append_new(man, ent)) return tk_err_errno(e, ENOMEM, "manifest");
    }
    if (wav_dir) {
        char dir[8192], path[8400];
        (void)ls_path(dir, sizeof dir, NULL, "%s/%s", wav_dir, u->rel);
        (void)ls_path(path, sizeof path, NULL, "%s/%s.wav", dir, u->id);
        TRY(ls_mkdirs(dir, e));
        TRY(ls_wav_write(path, a->pcm, a->n, e));
    }
    if (s->st->train && dur > LS_MAX_DURATION) {
        s->st->dropped_long++;
        return 0;
    }
    uint64_t o_id[2] = {0, strlen(u->id)}, o_pcm[2] = {0, a->n * 2}, o_txt[2] = {0, strlen(u->text)},
             o_tk[2] = {0, ntk * 4};
    int32_t rate = LS_SAMPLE_RATE;
    static const int16_t none = 0;
    tks_colref ref[NF] = {{u->id, o_id}, {a->pcm ? (const void *)a->pcm : &none, o_pcm}, {&rate, NULL},
                          {u->text, o_txt}, {ntk ? (const void *)tk : &none, o_tk}};
    TRY(tks_writer_append_ref(w, ref, 1, e));
    s->st->records++;
    s->st->samples += a->n;
    return 0;
}

// Pass 2 for one subset: blocks of utterances are decoded in parallel (one libFLAC decoder each),
// then written in order; the first error in utterance order is the one reported.
enum { DECODE_BLOCK = 64 };
static int write_subset(subset *s, tks_writer *w, const int32_t *ids, const uint64_t *off, size_t first,
                        const ls_prep_opts *o, const char *wav_dir, json_t *man, uint64_t *done, tk_err *e) {
    ls_audio a[DECODE_BLOCK];
    tk_err ae[DECODE_BLOCK];
    int arc[DECODE_BLOCK];
    for (size_t b = 0; b < s->n; b += DECODE_BLOCK) {
        int m = (int)(s->n - b < DECODE_BLOCK ? s->n - b : DECODE_BLOCK);
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < m; k++) {
            const utt *u = &s->u[b + (size_t)k];
            arc[k] = o->manifests ? ls_wav_read(u->audio, &a[k], &ae[k]) : ls_flac_read(u->audio, &a[k], &ae[k]);
        }
        int rc = 0;
        for (int k = 0; k < m; k++) {
            size_t i = b + (size_t)k;
            const int32_t *tk = ids + off[first + i];
            size_t ntk = (size_t)(off[first + i + 1] - off[first + i]);
            for (size_t j = 0; j < ntk && !rc; j++)
                if (tk[j] == 0) { // common/data/text.py asserts 0 not in the ids
                    rc = tk_err_set(e, TK_EDATA, "utterance %s: the sentencepiece model has no piece for part of its "
                                    "transcript (<unk>, id 0)", s->u[i].id);
                    tk_err_where(e, "%s", s->u[i].where);
                }
            if (!rc && arc[k]) { // the message names the file
                *e = ae[k];
                rc = arc[k];
            }
            if (!rc) rc = write_utt(s, i, &a[k], tk, ntk, o, wav_dir, man, w, e);
            if (!arc[k]) ls_audio_free(&a[k]);
        }
        if (rc) return rc;
        *done += (uint64_t)m;
        if (o->progress) o->progress(o->progress_ctx, *done);
    }
    return 0;
}

void ls_prep_stats_free(ls_prep_stats *st) {
    free(st->sub);
    st->sub = NULL;
}

int ls_prep(char *const *inputs, int ninputs, const ls_prep_opts *o, ls_prep_stats *st, tk_err *e) {
    memset(st, 0, sizeof *st);
    int vocab = o->vocab ? o->vocab : LS_VOCAB;
    // paths are built in fixed buffers (4096 bytes and more) below these lengths
    for (int i = 0; i < ninputs; i++)
        if (strlen(inputs[i]) > 3000) return tk_err_set(e, TK_EUSAGE, "%.60s...: a path over 3000 bytes", inputs[i]);
    if (strlen(o->out_dir) > 3000 || (o->root && strlen(o->root) > 3000))
        return tk_err_set(e, TK_EUSAGE, "-o/--root: a path over 3000 bytes");
    if (!o->manifests && !ls_flac_available()) return ls_flac_read(inputs[0], &(ls_audio){0}, e);
    st->sub = calloc((size_t)ninputs, sizeof *st->sub);
    subset *sub = calloc((size_t)ninputs, sizeof *sub);
    tks_writer **w = calloc((size_t)ninputs, sizeof *w);
    json_t **man = calloc((size_t)ninputs, sizeof *man);
    char (*wavtmp)[4200] = calloc((size_t)ninputs, sizeof *wavtmp);
    char train_txt[4200] = "", spm_dir[4200] = "", tmp_model[4300] = "", tmp_vocab[4300] = "";
    int32_t *ids = NULL;
    uint64_t *off = NULL;
    char **texts = NULL;
    int rc = !st->sub || !sub || !w || !man || !wavtmp ? tk_err_errno(e, ENOMEM, "subsets") : 0;
    st->nsubsets = ninputs;
    size_t total = 0, ntrain = 0;
    for (int i = 0; i < ninputs && !rc; i++) {
        sub[i].st = &st->sub[i];
        subset_name(inputs[i], o->manifests, st->sub[i].name, sizeof st->sub[i].name);
        st->sub[i].train = !strncmp(st->sub[i].name, "train", 5);
        for (int j = 0; j < i && !rc; j++)
            if (!strcmp(st->sub[i].name, st->sub[j].name))
                rc = tk_err_set(e, TK_EUSAGE, "%s and %s are the same subset (%s)", inputs[j], inputs[i], st->sub[i].name);
        if (!rc && o->wav) { // --wav never replaces a converted tree
            char dst[4200];
            (void)ls_path(dst, sizeof dst, NULL, "%s/%s-wav", o->out_dir, st->sub[i].name);
            if (access(dst, F_OK) == 0) rc = tk_err_set(e, TK_EUSAGE, "%s already exists: remove it, or leave out --wav", dst);
        }
        if (!rc) rc = o->manifests ? scan_manifest(&sub[i], inputs[i], o->root, e) : scan_folder(&sub[i], inputs[i], e);
        total += sub[i].n;
        if (st->sub[i].train) ntrain += sub[i].n;
    }
    if (!rc && ls_mkdirs(o->out_dir, e)) rc = e->code;
    // the tokenizer: the given model, or one trained on every training transcript
    if (!rc && o->spm_model) {
        snprintf(st->spm_model, sizeof st->spm_model, "%s", o->spm_model);
        if (access(o->spm_model, R_OK) != 0) rc = tk_err_errno(e, errno, "%s: cannot read the sentencepiece model", o->spm_model);
    } else if (!rc && !ntrain) {
        rc = tk_err_set(e, TK_EUSAGE, "no training utterances to train the sentencepiece model on: give a train-* "
                        "subset or --spm MODEL");
    } else if (!rc) {
        (void)ls_path(spm_dir, sizeof spm_dir, NULL, "%s/.spm.tmp.%d", o->out_dir, (int)getpid());
        (void)ls_path(train_txt, sizeof train_txt, NULL, "%s/txt.txt", spm_dir);
        (void)ls_path(tmp_model, sizeof tmp_model, NULL, "%s/librispeech%d.model", spm_dir, vocab);
        (void)ls_path(tmp_vocab, sizeof tmp_vocab, NULL, "%s/librispeech%d.vocab", spm_dir, vocab);
        rc = ls_mkdirs(spm_dir, e);
        FILE *f = rc ? NULL : fopen(train_txt, "w");
        if (!rc && !f) rc = tk_err_errno(e, errno, "%s: cannot create", train_txt);
        for (int i = 0; i < ninputs && !rc; i++)
            for (size_t j = 0; st->sub[i].train && j < sub[i].n; j++) fprintf(f, "%s\n", sub[i].u[j].text);
        if (f && (ferror(f) | fclose(f)) && !rc) rc = tk_err_errno(e, errno, "%s: write failed", train_txt);
        if (!rc) rc = ls_spm_train(spm_dir, vocab, e);
        (void)ls_path(st->spm_model, sizeof st->spm_model, NULL, "%s/librispeech%d.model", o->out_dir, vocab);
        st->spm_trained = 1;
    }
    if (!rc && !(texts = malloc((total ? total : 1) * sizeof *texts))) rc = tk_err_errno(e, ENOMEM, "transcripts");
    if (!rc) {
        size_t k = 0;
        for (int i = 0; i < ninputs; i++)
            for (size_t j = 0; j < sub[i].n; j++) texts[k++] = sub[i].u[j].text;
        rc = ls_spm_encode(st->spm_trained ? tmp_model : o->spm_model, texts, total, &ids, &off, e);
        if (!rc) st->tokens = off[total];
    }
    // pass 2
    uint64_t done = 0;
    size_t first = 0;
    for (int i = 0; i < ninputs && !rc; i++) {
        char path[4200];
        (void)ls_path(path, sizeof path, NULL, "%s/%s.tks", o->out_dir, st->sub[i].name);
        tks_schema s;
        schema(&s, &st->sub[i], st->spm_model, st->spm_trained ? vocab : 0); // a given model's size: unknown here
        if ((rc = tks_writer_open(&w[i], path, &s, NULL, e))) break;
        if (!o->manifests && !(man[i] = json_array())) rc = tk_err_errno(e, ENOMEM, "manifest");
        if (!rc && o->wav) {
            (void)ls_path(wavtmp[i], sizeof wavtmp[i], NULL, "%s/.%s-wav.tmp.%d", o->out_dir, st->sub[i].name, (int)getpid());
            rc = ls_mkdirs(wavtmp[i], e);
        }
        if (!rc) rc = write_subset(&sub[i], w[i], ids, off, first, o, o->wav ? wavtmp[i] : NULL, man[i], &done, e);
        first += sub[i].n;
    }
    // commit: the WAV folders (checked absent before), the model, the manifests, the records
    for (int i = 0; i < ninputs && !rc && o->wav; i++) {
        char dst[4200];
        (void)ls_path(dst, sizeof dst, NULL, "%s/%s-wav", o->out_dir, st->sub[i].name);
        if (rename(wavtmp[i], dst)) rc = tk_err_errno(e, errno, "%s: cannot move the WAV folder into place", dst);
        else wavtmp[i][0] = 0;
    }
    if (!rc && st->spm_trained) {
        char dst[4300];
        (void)ls_path(dst, sizeof dst, NULL, "%s/librispeech%d.vocab", o->out_dir, vocab);
        if (rename(tmp_model, st->spm_model) || rename(tmp_vocab, dst)) rc = tk_err_errno(e, errno, "%s: cannot rename", dst);
    }
    for (int i = 0; i < ninputs && !rc && man[i]; i++) {
        char path[4200];
        (void)ls_path(path, sizeof path, NULL, "%s/librispeech-%s-wav.json", o->out_dir, st->sub[i].name);
        char *text = json_dumps(man[i], JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
        rc = text ? write_text(path, text, e) : tk_err_errno(e, ENOMEM, "manifest");
        free(text);
    }
    for (int i = 0; i < ninputs && w; i++) {
        if (!w[i]) continue;
        if (!rc) rc = tks_writer_close(w[i], e);
        else tks_writer_abort(w[i]);
    }
    if (spm_dir[0]) ls_rm_tree(spm_dir);
    for (int i = 0; i < ninputs && wavtmp; i++)
        if (wavtmp[i][0]) ls_rm_tree(wavtmp[i]);
    for (int i = 0; i < ninputs && sub; i++) subset_free(&sub[i]), json_decref(man ? man[i] : NULL);
    free(sub), free(w), free(man), free(wavtmp), free(ids), free(off), free(texts);
    return rc;
}
