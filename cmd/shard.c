// shard: split a .tks record stream into N shard files, verify, concatenate and summarize shards
// (man/man1/shard.1).
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "core/philox.h"
#include "tks/tks.h"

static const char *prog = "shard";
static const char *usage =
    "Usage: shard -n N -o DIR [--mode contiguous|round-robin] [--block-records K]\n"
    "             [--shuffle-seed S] [--frame-records F] [INPUT.tks|-]\n"
    "       shard --verify FILE...\n"
    "       shard --cat FILE...\n"
    "       shard --stats FILE...\n";

static void help(void) {
    printf("%s\n"
           "Split a .tks record stream into N shards DIR/part-00000-of-0000N.tks ..., or check,\n"
           "concatenate or summarize .tks files.\n\n"
           "  -n, --shards N           number of shards (1..65536)\n"
           "  -o, --output DIR         directory for the shards (created if missing)\n"
           "      --mode M             contiguous (default): shard i gets the i-th N-th of the\n"
           "                           records; round-robin: block j goes to shard j mod N\n"
           "      --block-records K    records per block (default 4096)\n"
           "      --shuffle-seed S     shuffle the order of blocks (Philox, seed S) first\n"
           "      --frame-records F    records per zstd frame in the shards (default 65536)\n"
           "      --verify             full checksum pass over each FILE\n"
           "      --cat                write the records of all FILEs as one stream to stdout\n"
           "      --stats              JSON Lines statistics of each FILE on stdout\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n"
           "  -V, --version            version\n\n"
           "Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See shard(1).\n",
           usage);
}

// A slice of a decoded frame, records [start, start + n), for tks_writer_append_ref.
static void frame_slice(const tks_schema *s, const tks_frame *fr, size_t start, tks_colref *ref) {
    for (int f = 0; f < s->nfields; f++) {
        const tks_column *c = &fr->col[f];
        ref[f] = s->f[f].ragged ? (tks_colref){c->data, c->off + start}
                                : (tks_colref){(const uint8_t *)c->data + start * s->f[f].bytes, NULL};
    }
}

// ---- split -----------------------------------------------------------------------------------
typedef struct {
    tks_reader *r;
    const tks_schema *s;
    tks_frame fr;         // the cached decoded frame
    size_t cached;        // frame index + 1 (0 = none)
} frame_cache;

static size_t frame_of(const tks_reader *r, uint64_t rec) {
    size_t lo = 0, hi = tks_reader_nframes(r); // last frame with first_record <= rec
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (tks_reader_frame(r, mid)->first_record <= rec) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Appends records [start, start+n) of the input to writer w.
static int copy_range(frame_cache *c, uint64_t start, uint64_t n, tks_writer *w, tk_err *e) {
    while (n) {
        size_t fi = frame_of(c->r, start);
        if (c->cached != fi + 1) {
            c->cached = 0;
            TRY(tks_reader_read(c->r, fi, &c->fr, e));
            c->cached = fi + 1;
        }
        uint64_t off = start - tks_reader_frame(c->r, fi)->first_record;
        uint64_t k = c->fr.n - off < n ? c->fr.n - off : n;
        tks_colref src[TKS_MAX_FIELDS];
        frame_slice(c->s, &c->fr, (size_t)off, src);
        TRY(tks_writer_append_ref(w, src, (size_t)k, e));
        start += k;
        n -= k;
    }
    return 0;
}

// A stream is copied to a temporary file in DIR first: contiguous splits need the record count
// and shuffles need random access. The file is unlinked at once (it lives while open).
static int spool(const char *dir, char *path, size_t cap, tk_err *e) {
    snprintf(path, cap, "%s/.shard-spool.%ld.tks", dir, (long)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return tk_err_errno(e, errno, "%s: cannot create", path);
    static char buf[1 << 16];
    ssize_t k;
    int rc = 0;
    while (!rc && (k = read(0, buf, sizeof buf)) != 0) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = tk_err_errno(e, errno, "<stdin>: read failed");
        else if (write(fd, buf, (size_t)k) != k) rc = tk_err_errno(e, errno ? errno : EIO, "%s: write failed", path);
    }
    close(fd);
    if (rc) unlink(path);
    return rc;
}

typedef struct {
    int64_t n, block, frame_records;
    int round_robin, shuffle, progress;
    uint64_t seed;
    const char *out;
} split_opts;

static int run_split(const split_opts *o, const char *input, tk_err *e) {
    if (mkdir(o->out, 0755) != 0 && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", o->out);
    char spooled[4200] = "";
    int rc = 0;
    if (strcmp(input, "-") == 0) {
        struct stat st;
        if (fstat(0, &st) != 0 || !S_ISREG(st.st_mode)) {
            TRY(spool(o->out, spooled, sizeof spooled, e));
            input = spooled;
        }
    }
    tks_reader *r = NULL;
    rc = tks_reader_open(&r, input, e);
    if (spooled[0]) unlink(spooled);
    if (rc) { // name the spool "<stdin>" in the message: that is what the user gave
        const char *rest = spooled[0] ? strchr(e->where, ':') : NULL;
        if (rest) {
            char where[sizeof e->where];
            snprintf(where, sizeof where, "<stdin>%s", rest);
            snprintf(e->where, sizeof e->where, "%s", where);
        }
        return rc;
    }
    const tks_schema *s = tks_reader_schema(r);
    uint64_t T = tks_reader_nrecords(r), K = (uint64_t)o->block, nb = (T + K - 1) / K;
    uint64_t *order = malloc((nb ? nb : 1) * sizeof *order);
    tks_writer **w = calloc((size_t)o->n, sizeof *w);
    char (*paths)[4200] = calloc((size_t)o->n, sizeof *paths);
    frame_cache c = {.r = r, .s = s};
    if (!order || !w || !paths) rc = tk_err_errno(e, ENOMEM, "out of memory");
    for (uint64_t b = 0; b < nb && !rc; b++) order[b] = b;
    if (o->shuffle) // Fisher-Yates with Philox draws: the same permutation on every machine
        for (uint64_t b = nb; b > 1 && !rc; b--) {
            tk_philox_ctr x = tk_philox_draw(o->seed, TK_RNG_SHUFFLE, b);
            uint64_t j = (((uint64_t)x.v[0] << 32) | x.v[1]) % b, t = order[b - 1];
            order[b - 1] = order[j];
            order[j] = t;
        }
    tks_writer_opts wo = {.records_per_frame = (size_t)o->frame_records, .zstd_level = 3, .threads = 1};
    for (int64_t i = 0; i < o->n && !rc; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/part-%05lld-of-%05lld.tks", o->out, (long long)i, (long long)o->n);
        rc = tks_writer_open(&w[i], paths[i], s, &wo, e);
    }
    tk_progress pr;
    tk_progress_init(&pr, "shard", "records", T, o->progress);
    uint64_t pos = 0; // records written so far, in the (shuffled) block sequence
    for (uint64_t j = 0; j < nb && !rc; j++) {
        uint64_t start = order[j] * K, n = T - start < K ? T - start : K;
        if (o->round_robin) {
            rc = copy_range(&c, start, n, w[j % (uint64_t)o->n], e);
            pos += n;
        }
        while (!o->round_robin && n && !rc) { // contiguous: shard i holds positions [i*T/N, (i+1)*T/N)
            uint64_t i = pos * (uint64_t)o->n / T; // a guess, then exact
            while (i > 0 && i * T / (uint64_t)o->n > pos) i--;
            while ((i + 1) * T / (uint64_t)o->n <= pos) i++;
            uint64_t end = (i + 1) * T / (uint64_t)o->n, k = end - pos < n ? end - pos : n;
            rc = copy_range(&c, start, k, w[i], e);
            start += k;
            n -= k;
            pos += k;
        }
        tk_progress_update(&pr, pos);
    }
    int committed = 0;
    for (int64_t i = 0; i < o->n && !rc; i++) {
        rc = tks_writer_close(w[i], e);
        w[i] = NULL;
        if (!rc) committed++;
    }
    for (int64_t i = 0; i < o->n; i++) tks_writer_abort(w[i]);
    if (rc) // all or nothing: remove the parts already committed
        for (int i = 0; i < committed; i++) unlink(paths[i]);
    else
        tk_progress_end(&pr, T);
    tks_frame_free(&c.fr);
    free(order);
    free(w);
    free(paths);
    tks_reader_close(r);
    return rc;
}

// ---- verify, cat, stats ----------------------------------------------------------------------
static int verify_one(const char *path, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    tks_frame fr = {0};
    int rc = 0;
    uint64_t recs = 0;
    do { // tks_reader_next_frame checks every frame, then the index against what it saw
        rc = tks_reader_next_frame(r, &fr, e);
        recs += fr.n;
    } while (!rc && fr.n);
    if (!rc)
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:b,s:I,s:I}", "type", "verify", "file", path, "ok", 1,
                                             "records", (json_int_t)recs, "frames",
                                             (json_int_t)tks_reader_nframes(r)), e);
    tks_frame_free(&fr);
    tks_reader_close(r);
    return rc;
}

static int same_schema(const tks_schema *a, const tks_schema *b) {
    if (a->nfields != b->nfields) return 0;
    for (int f = 0; f < a->nfields; f++)
        if (strcmp(a->f[f].name, b->f[f].name) || a->f[f].dtype != b->f[f].dtype || a->f[f].bytes != b->f[f].bytes ||
            a->f[f].ndim != b->f[f].ndim || memcmp(a->f[f].shape, b->f[f].shape, sizeof a->f[f].shape))
            return 0;
    return 1;
}

static int run_cat(char **files, int nfiles, tk_err *e) {
    TRY(tk_cli_refuse_tty(stdout, "a .tks record stream", e));
    tks_writer *w = NULL;
    tks_schema first;
    int rc = 0;
    for (int i = 0; i < nfiles && !rc; i++) {
        tks_reader *r;
        if ((rc = tks_reader_open(&r, files[i], e))) break;
        const tks_schema *s = tks_reader_schema(r);
        if (!w) {
            first = *s;
            rc = tks_writer_open(&w, "-", s, NULL, e);
        } else if (!same_schema(&first, s)) {
            rc = tk_err_set(e, TK_EDATA, "%s: schema differs from %s's", files[i], files[0]);
        }
        tks_frame fr = {0};
        while (!rc) {
            if ((rc = tks_reader_next_frame(r, &fr, e)) || !fr.n) break;
            tks_colref src[TKS_MAX_FIELDS];
            frame_slice(s, &fr, 0, src);
            rc = tks_writer_append_ref(w, src, fr.n, e);
        }
        tks_frame_free(&fr);
        tks_reader_close(r);
    }
    if (!rc) rc = tks_writer_close(w, e);
    else tks_writer_abort(w);
    return rc;
}

static double value_at(const void *col, tks_dtype t, size_t i) {
    switch (t) {
    case TKS_U8: return ((const uint8_t *)col)[i];
    case TKS_I8: return ((const int8_t *)col)[i];
    case TKS_I16: return ((const int16_t *)col)[i];
    case TKS_I32: return ((const int32_t *)col)[i];
    case TKS_I64: return (double)((const int64_t *)col)[i];
    case TKS_F32: return ((const float *)col)[i];
    case TKS_F64: return ((const double *)col)[i];
    case TKS_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)col)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case TKS_F16: {
        uint16_t h = ((const uint16_t *)col)[i];
        int ex = (h >> 10) & 31, m = h & 1023;
        double v = ex == 0 ? ldexp(m, -24) : ex == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, ex - 25);
        return h & 0x8000 ? -v : v;
    }
    }
    return NAN;
}

static int stats_one(const char *path, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    const tks_schema *s = tks_reader_schema(r);
    tks_frame fr = {0};
    // Scalar fields: their values; ragged fields: their lengths (rows per record).
    double mn[TKS_MAX_FIELDS], mx[TKS_MAX_FIELDS], sum[TKS_MAX_FIELDS] = {0};
    for (int f = 0; f < s->nfields; f++) mn[f] = INFINITY, mx[f] = -INFINITY;
    int rc = 0;
    uint64_t recs = 0;
    while (!(rc = tks_reader_next_frame(r, &fr, e)) && fr.n) {
        for (int f = 0; f < s->nfields; f++) {
            const tks_field *fd = &s->f[f];
            if (fd->ndim && !fd->ragged) continue;
            for (size_t i = 0; i < fr.n; i++) {
                double v = fd->ragged ? (double)((fr.col[f].off[i + 1] - fr.col[f].off[i]) / fd->row_bytes)
                                      : value_at(fr.col[f].data, fd->dtype, i);
                mn[f] = v < mn[f] ? v : mn[f];
                mx[f] = v > mx[f] ? v : mx[f];
                sum[f] += v;
            }
        }
        recs += fr.n;
    }
    if (!rc) {
        json_t *fields = json_array();
        for (int f = 0; f < s->nfields; f++) {
            const tks_field *fd = &s->f[f];
            json_t *shape = json_array();
            for (int d = 0; d < fd->ndim; d++) json_array_append_new(shape, json_integer(fd->shape[d]));
            json_t *o = json_pack("{s:s,s:s,s:o}", "name", fd->name, "dtype", tks_dtype_name(fd->dtype), "shape", shape);
            if ((!fd->ndim || fd->ragged) && recs) {
                const char *k[2][3] = {{"min", "max", "mean"}, {"min_length", "max_length", "mean_length"}};
                json_object_set_new(o, k[fd->ragged][0], json_real(mn[f]));
                json_object_set_new(o, k[fd->ragged][1], json_real(mx[f]));
                json_object_set_new(o, k[fd->ragged][2], json_real(sum[f] / (double)recs));
            }
            json_array_append_new(fields, o);
        }
        struct stat st;
        json_t *bytes = strcmp(path, "-") != 0 && stat(path, &st) == 0 ? json_integer(st.st_size) : json_null();
        json_error_t jerr;
        json_t *meta = json_loads(s->meta_json, 0, &jerr);
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:I,s:I,s:o,s:o,s:o}", "type", "stats", "file", path,
                                             "records", (json_int_t)recs, "frames", (json_int_t)tks_reader_nframes(r),
                                             "bytes", bytes, "fields", fields, "meta", meta ? meta : json_object()), e);
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
    return rc;
}

int main(int argc, char **argv) {
    enum { O_MODE = 256, O_BLOCK, O_SEED, O_FRAME, O_VERIFY, O_CAT, O_STATS, O_PROGRESS };
    static const struct option longopts[] = {
        {"shards", required_argument, 0, 'n'},         {"output", required_argument, 0, 'o'},
        {"mode", required_argument, 0, O_MODE},         {"block-records", required_argument, 0, O_BLOCK},
        {"shuffle-seed", required_argument, 0, O_SEED}, {"frame-records", required_argument, 0, O_FRAME},
        {"verify", no_argument, 0, O_VERIFY},           {"cat", no_argument, 0, O_CAT},
        {"stats", no_argument, 0, O_STATS},             {"progress", no_argument, 0, O_PROGRESS},
        {"help", no_argument, 0, 'h'},                  {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    split_opts o = {.n = 0, .block = 4096, .frame_records = 65536};
    int action = 0, c, split_given = 0;
    tk_err e;
    tk_err_clear(&e);
    int64_t v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:o:hV", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'n': rc = tk_parse_i64(optarg, 1, 65536, "-n", &o.n, &e); break;
        case 'o': o.out = optarg; break;
        case O_MODE:
            if (strcmp(optarg, "contiguous") == 0) o.round_robin = 0;
            else if (strcmp(optarg, "round-robin") == 0) o.round_robin = 1;
            else return tk_cli_usage_error(prog, usage, "--mode: expected contiguous or round-robin, got '%s'", optarg);
            split_given = 1;
            break;
        case O_BLOCK: rc = tk_parse_i64(optarg, 1, 1 << 30, "--block-records", &o.block, &e), split_given = 1; break;
        case O_SEED:
            rc = tk_parse_i64(optarg, 0, INT64_MAX, "--shuffle-seed", &v, &e);
            o.seed = (uint64_t)v;
            o.shuffle = 1;
            split_given = 1;
            break;
        case O_FRAME: rc = tk_parse_i64(optarg, 1, 1 << 30, "--frame-records", &o.frame_records, &e), split_given = 1; break;
        case O_VERIFY: case O_CAT: case O_STATS:
            if (action && action != c) return tk_cli_usage_error(prog, usage, "--verify, --cat and --stats exclude each other");
            action = c;
            break;
        case O_PROGRESS: o.progress = 1; break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return tk_cli_usage_error(prog, usage, "%s", e.what);
    }
    char **files = argv + optind;
    int nfiles = argc - optind, rc = 0, worst = 0;
    if (action) {
        if (o.n || o.out || split_given) return tk_cli_usage_error(prog, usage, "-n, -o and the split options are for splitting");
        if (!nfiles) return tk_cli_usage_error(prog, usage, "no input files");
        if (action == O_CAT) {
            rc = run_cat(files, nfiles, &e);
        } else {
            // Every file is checked; the exit status is the worst seen.
            for (int i = 0; i < nfiles; i++) {
                tk_err_clear(&e);
                int r = action == O_VERIFY ? verify_one(files[i], &e) : stats_one(files[i], &e);
                if (r == TK_EIO && e.lib_code == EPIPE) return TK_EIO; // reader went away: quiet
                if (r) tk_cli_fail(prog, &e);
                if (r > worst) worst = r;
            }
            tk_err_clear(&e);
            if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
            return worst;
        }
    } else {
        if (!o.n || !o.out) return tk_cli_usage_error(prog, usage, "splitting needs -n N and -o DIR");
        if (nfiles > 1) return tk_cli_usage_error(prog, usage, "one input at a time (use shard --cat A B | shard ...)");
        if (nfiles == 0 && isatty(0)) return tk_cli_usage_error(prog, usage, "no input (give a file, or pipe a stream)");
        rc = run_split(&o, nfiles ? files[0] : "-", &e);
    }
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
