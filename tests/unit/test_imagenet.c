// lib/imagenet: label files and synset lists, CRC-32C and TFRecord/Example reading (inputs built
// here from the protobuf and TFRecord specifications), directory scans, conversion to .tks, and
// the loader (each batch image checked against a decode of the record it must come from).
#include <sys/stat.h>
#include <unistd.h>

#include "image/codec.h"
#include "imagenet/imagenet.h"
#include "imagenet_prep.h"
#include "tk_test.h"
#include "test_image.h"

static const char *tpath(const char *name) { return tk_test_path("test_imagenet", name); }

static void put_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

// ---- CRC-32C, protobuf and TFRecord encoders for the inputs -----------------------------------
TK_TEST(crc32c_vectors) {
    // RFC 3720 (iSCSI) appendix B.4, and the usual check value of "123456789"
    uint8_t z[32] = {0}, f[32], inc[32];
    for (int i = 0; i < 32; i++) f[i] = 0xff, inc[i] = (uint8_t)i;
    CHECK_EQ_INT(imagenet_crc32c(0, z, 32), 0x8A9136AA);
    CHECK_EQ_INT(imagenet_crc32c(0, f, 32), 0x62A8AB43);
    CHECK_EQ_INT(imagenet_crc32c(0, inc, 32), 0x46DD794E);
    CHECK_EQ_INT(imagenet_crc32c(0, "123456789", 9), 0xE3069283);
    CHECK_EQ_INT(imagenet_crc32c(imagenet_crc32c(0, "1234", 4), "56789", 5), 0xE3069283);
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void bput(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) b->p = realloc(b->p, b->cap = (b->n + n) * 2 + 64);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        bput(b, &c, 1);
    } while (v);
}

static void ld(buf *b, int field, const void *p, size_t n) { // a length-delimited field
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, n);
    bput(b, p, n);
}

// A feature map entry: key -> Feature{kind: list{value}}. kind 1 bytes, 3 int64 (packed or not).
static void entry_bytes(buf *feats, const char *key, const void *v, size_t n) {
    buf list = {0}, feat = {0}, ent = {0};
    ld(&list, 1, v, n);
    ld(&feat, 1, list.p, list.n);
    ld(&ent, 1, key, strlen(key));
    ld(&ent, 2, feat.p, feat.n);
    ld(feats, 1, ent.p, ent.n);
    free(list.p), free(feat.p), free(ent.p);
}

static void entry_int(buf *feats, const char *key, int64_t v, int packed) {
    buf list = {0}, feat = {0}, ent = {0}, pk = {0};
    if (packed) {
        varint(&pk, (uint64_t)v);
        ld(&list, 1, pk.p, pk.n);
    } else {
        varint(&list, 1 << 3 | 0);
        varint(&list, (uint64_t)v);
    }
    ld(&feat, 3, list.p, list.n);
    ld(&ent, 1, key, strlen(key));
    ld(&ent, 2, feat.p, feat.n);
    ld(feats, 1, ent.p, ent.n);
    free(list.p), free(feat.p), free(ent.p), free(pk.p);
}

static buf example(const void *jpg, size_t n, int64_t label, int packed, const char *fname) {
    buf feats = {0}, ex = {0};
    entry_int(&feats, "image/height", 375, packed);
    if (fname) entry_bytes(&feats, "image/filename", fname, strlen(fname));
    if (jpg) entry_bytes(&feats, "image/encoded", jpg, n);
    if (label >= 0) entry_int(&feats, "image/class/label", label, packed);
    entry_bytes(&feats, "image/format", "JPEG", 4);
    ld(&ex, 1, feats.p, feats.n);
    free(feats.p);
    return ex;
}

static void tfrecord(buf *f, const buf *rec) {
    uint8_t h[12];
    for (int i = 0; i < 8; i++) h[i] = (uint8_t)((uint64_t)rec->n >> (8 * i));
    uint32_t c = imagenet_crc_mask(imagenet_crc32c(0, h, 8));
    for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(c >> (8 * i));
    bput(f, h, 12);
    bput(f, rec->p, rec->n);
    c = imagenet_crc_mask(imagenet_crc32c(0, rec->p, rec->n));
    uint8_t t[4] = {(uint8_t)c, (uint8_t)(c >> 8), (uint8_t)(c >> 16), (uint8_t)(c >> 24)};
    bput(f, t, 4);
}

TK_TEST(example_parse) {
    imagenet_example x;
    tk_err e;
    for (int packed = 0; packed < 2; packed++) {
        buf ex = example("\xff\xd8\xff\xe0jpeg", 8, 615, packed, "n03623198_1.JPEG");
        CHECK_EQ_INT(imagenet_example_parse(ex.p, ex.n, &x, &e), 0);
        CHECK_EQ_INT(x.label, 615);
        CHECK(x.encoded_len == 8 && memcmp(x.encoded, "\xff\xd8\xff\xe0jpeg", 8) == 0);
        CHECK(x.filename_len == 16 && memcmp(x.filename, "n03623198_1.JPEG", 16) == 0);
        CHECK(x.synset == NULL);
        // every shorter prefix is refused, never read past
        int refused = 0;
        for (size_t k = 1; k < ex.n; k++) refused += imagenet_example_parse(ex.p, k, &x, &e) == TK_EDATA;
        CHECK(refused > 0);
        free(ex.p);
    }
    buf ex = example("\xff\xd8\xff", 3, -1, 0, NULL);
    CHECK_EQ_INT(imagenet_example_parse(ex.p, ex.n, &x, &e), 0);
    CHECK_EQ_INT(x.label, -1);
    free(ex.p);
    ex = example(NULL, 0, 5, 0, NULL);
    CHECK_EQ_INT(imagenet_example_parse(ex.p, ex.n, &x, &e), TK_EDATA);
    CHECK_STR(e.what, "bad Example: no image/encoded bytes");
    uint8_t trunc[4] = {0x0a, 0x7f, 0x0a, 0x01};
    CHECK_EQ_INT(imagenet_example_parse(trunc, 4, &x, &e), TK_EDATA);
    CHECK_STR(e.what, "bad Example: a length past the end of the message");
    uint8_t group[2] = {0x0b, 0x0c}; // field 1, wire type 3 (start group)
    CHECK_EQ_INT(imagenet_example_parse(group, 2, &x, &e), TK_EDATA);
    CHECK_STR(e.what, "bad Example: an unsupported wire type (groups)");
    free(ex.p);
}

// ---- label files and synset lists -------------------------------------------------------------
TK_TEST(labels_kaggle_list_devkit) {
    imagenet_labels l;
    tk_err e;
    const char *kag = "\xEF\xBB\xBFImageId,PredictionString\r\nILSVRC2012_val_00008726,n02119789 255 142 454 329 n02119789 44 21 322 295\r\n"
                      "\r\nILSVRC2012_val_00000001,n01751748 1 2 3 4 \r\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, kag, strlen(kag), "sol.csv", NULL, &e), 0);
    CHECK_EQ_INT(l.kind, IMAGENET_LABELS_KAGGLE);
    CHECK_EQ_INT(l.n, 2);
    CHECK_STR(l.image[0], "ILSVRC2012_val_00008726");
    CHECK_STR(l.wnid[0], "n02119789");
    CHECK_STR(l.image[1], "ILSVRC2012_val_00000001");
    CHECK_STR(l.wnid[1], "n01751748");
    CHECK_EQ_INT(l.line[1], 4);
    imagenet_labels_free(&l);
    const char *badk = "ImageId,PredictionString\nILSVRC2012_val_00000001,dog 1 2 3 4\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, badk, strlen(badk), "sol.csv", NULL, &e), TK_EDATA);
    CHECK_STR(e.where, "sol.csv: line 2");
    CHECK_STR(e.what, "expected a WordNet id first in the PredictionString, got 'dog'");
    const char *list = "n01751748\nn09193705\n\nn02105855\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, list, strlen(list), "synset_labels.txt", NULL, &e), 0);
    CHECK_EQ_INT(l.kind, IMAGENET_LABELS_LIST);
    CHECK_EQ_INT(l.n, 3);
    CHECK_STR(l.wnid[2], "n02105855");
    imagenet_labels_free(&l);
    const char *dev = "490\n3\n2\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, dev, strlen(dev), "gt.txt", NULL, &e), TK_EUSAGE);
    CHECK(strstr(e.what, "--devkit-synsets") != NULL);
    imagenet_synsets order;
    const char *ord = "n03000003 third\nn01000001\nn02000002 x\n";
    CHECK_EQ_INT(imagenet_synsets_parse(&order, ord, strlen(ord), "meta", &e), 0); // sorted
    CHECK_STR(order.id[0], "n01000001");
    imagenet_synsets_free(&order);
    char *ordfile = strdup(tpath("order.txt"));
    put_file(ordfile, ord, strlen(ord));
    CHECK_EQ_INT(imagenet_synset_order_load(&order, ordfile, &e), 0); // file order kept
    CHECK_STR(order.id[0], "n03000003");
    const char *dev3 = "1\n3\n2\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, dev3, strlen(dev3), "gt.txt", &order, &e), 0);
    CHECK_EQ_INT(l.kind, IMAGENET_LABELS_DEVKIT);
    CHECK(l.id[1] == 3 && strcmp(l.wnid[0], "n03000003") == 0 && strcmp(l.wnid[1], "n02000002") == 0);
    imagenet_labels_free(&l);
    const char *dev4 = "1\n4\n";
    CHECK_EQ_INT(imagenet_labels_parse(&l, dev4, strlen(dev4), "gt.txt", &order, &e), TK_EDATA);
    CHECK_STR(e.where, "gt.txt: line 2");
    CHECK_STR(e.what, "expected an ILSVRC2012_ID in 1..3");
    CHECK_EQ_INT(imagenet_labels_parse(&l, "hello\n", 6, "x.txt", NULL, &e), TK_EDATA);
    CHECK_STR(e.where, "x.txt: line 1");
    CHECK_EQ_INT(imagenet_labels_parse(&l, "\n\n", 2, "x.txt", NULL, &e), TK_EDATA);
    CHECK_STR(e.what, "x.txt: no labels in the file");
    imagenet_synsets_free(&order);
    const char *badsyn = "n01000001\nn0100000x\n";
    CHECK_EQ_INT(imagenet_synsets_parse(&order, badsyn, strlen(badsyn), "s.txt", &e), TK_EDATA);
    CHECK_STR(e.where, "s.txt: line 2");
    free(ordfile);
}

// ---- a small synthetic tree: scan, prep, loader -------------------------------------------------
static const char *tree(void) {
    static char dir[512];
    if (dir[0]) return dir;
    snprintf(dir, sizeof dir, "%s", tpath("syn"));
    imagenet_synth_opts o = {.classes = 4, .train_per_class = 6, .val_per_class = 2, .width = 48, .height = 40,
                             .quality = 90, .seed = 5, .odd_fraction = 0, .threads = 2};
    imagenet_synth_stats st;
    tk_err e;
    if (imagenet_synth(dir, &o, &st, NULL, NULL, &e)) printf("# synth: %s\n", e.what);
    return dir;
}

TK_TEST(scan_and_prep_train_tree) {
    NEED_JPEG();
    const char *dir = tree();
    char train[600];
    snprintf(train, sizeof train, "%s/train", dir);
    imagenet_scan_opts so = {0};
    imagenet_items it;
    imagenet_synsets syn;
    imagenet_scan_stats sc;
    tk_err e;
    CHECK_EQ_INT(imagenet_scan(train, &so, &it, &syn, &sc, &e), 0);
    CHECK_EQ_INT(it.n, 24);
    CHECK_EQ_INT(syn.n, 4);
    CHECK_EQ_INT(sc.layout, 1);
    for (size_t i = 0; i < it.n; i++) {
        char id[16], want[64];
        imagenet_synth_wnid((int)(i / 6), id);
        snprintf(want, sizeof want, "%s_%d.JPEG", id, (int)(i % 6));
        CHECK_STR(it.v[i].name, want);
        CHECK_EQ_INT(it.v[i].label, (int)(i / 6));
    }
    imagenet_items_free(&it);
    imagenet_synsets_free(&syn);
    imagenet_prep_stats ps;
    CHECK_EQ_INT(imagenet_test_prep(train, &so, tpath("t1.tks"), 1, NULL, &ps, &e), 0);
    CHECK_EQ_INT(ps.records, 24);
    CHECK_EQ_INT(ps.grayscale, 1);      // synth: class 0 image 1 is grayscale,
    CHECK_EQ_INT(ps.converted_cmyk, 1); // image 2 CMYK
    CHECK_EQ_INT(ps.converted_png, 1);  // and image 3 a PNG named .JPEG
    CHECK_EQ_INT(imagenet_test_prep(train, &so, tpath("t3.tks"), 3, NULL, &ps, &e), 0);
    size_t n1, n3;
    uint8_t *b1 = slurp(tpath("t1.tks"), &n1), *b3 = slurp(tpath("t3.tks"), &n3);
    CHECK(n1 == n3 && memcmp(b1, b3, n1) == 0); // the same bytes whatever the threads
    free(b1);
    free(b3);
    // the records: label, size from the JPEG's header, the converted ones are 3-component JPEGs
    tks_reader *r;
    tks_frame fr = {0};
    CHECK_EQ_INT(tks_reader_open(&r, tpath("t1.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_read(r, 0, &fr, &e), 0);
    for (size_t i = 0; i < fr.n; i++) {
        const uint8_t *j = (const uint8_t *)fr.col[0].data + fr.col[0].off[i];
        tk_jpeg_info info;
        CHECK_EQ_INT(tk_jpeg_info_read(j, fr.col[0].off[i + 1] - fr.col[0].off[i], &info, &e), 0);
        CHECK_EQ_INT(((int16_t *)fr.col[1].data)[i], (int)(i / 6));
        CHECK_EQ_INT(((int32_t *)fr.col[2].data)[i], info.height);
        CHECK_EQ_INT(((int32_t *)fr.col[3].data)[i], info.width);
        CHECK(info.color == (i == 1 ? TK_JPEG_GRAY : TK_JPEG_YCBCR));
        CHECK_EQ_INT(fr.col[4].off[i + 1] - fr.col[4].off[i], strlen("n01000000_0.JPEG"));
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
}

TK_TEST(scan_flat_val_three_label_forms_agree) {
    NEED_JPEG();
    const char *dir = tree();
    char val[600], lab[3][600], order[600];
    snprintf(val, sizeof val, "%s/val", dir);
    snprintf(lab[0], sizeof lab[0], "%s/LOC_val_solution.csv", dir);
    snprintf(lab[1], sizeof lab[1], "%s/synset_labels.txt", dir);
    snprintf(lab[2], sizeof lab[2], "%s/ILSVRC2012_validation_ground_truth.txt", dir);
    snprintf(order, sizeof order, "%s/devkit_synsets.txt", dir);
    tk_err e;
    imagenet_prep_stats ps;
    for (int k = 0; k < 3; k++) {
        imagenet_scan_opts so = {.labels_file = lab[k], .devkit_synsets = k == 2 ? order : NULL};
        char out[32];
        snprintf(out, sizeof out, "v%d.tks", k);
        CHECK_EQ_INT(imagenet_test_prep(val, &so, tpath(out), 2, NULL, &ps, &e), 0);
        CHECK_EQ_INT(ps.records, 8);
    }
    size_t n0, n;
    uint8_t *b0 = slurp(tpath("v0.tks"), &n0);
    for (int k = 1; k < 3; k++) {
        char out[32];
        snprintf(out, sizeof out, "v%d.tks", k);
        uint8_t *b = slurp(tpath(out), &n);
        CHECK(n == n0 && memcmp(b, b0, n) == 0);
        free(b);
    }
    free(b0);
    // no labels given: a usage error that says what to give
    imagenet_scan_opts none = {0};
    imagenet_items it;
    imagenet_synsets syn;
    imagenet_scan_stats sc;
    CHECK_EQ_INT(imagenet_scan(val, &none, &it, &syn, &sc, &e), TK_EUSAGE);
    char want[800];
    snprintf(want, sizeof want, "%s has no class folders (nXXXXXXXX/): give its labels with --labels FILE", val);
    CHECK_STR(e.what, want);
}

TK_TEST(loader_batches_match_records) {
    NEED_JPEG();
    const char *dir = tree();
    char val[600], lab[600];
    snprintf(val, sizeof val, "%s/val", dir);
    snprintf(lab, sizeof lab, "%s/LOC_val_solution.csv", dir);
    tk_err e;
    tks_reader *r;
    tks_frame fr = {0};
    CHECK_EQ_INT(tks_reader_open(&r, tpath("t1.tks"), &e), 0); // from scan_and_prep_train_tree
    CHECK_EQ_INT(tks_reader_read(r, 0, &fr, &e), 0);
    tks_reader_close(r);
    size_t per = 32 * 32 * 3;
    float *want = malloc(per * 4);
    tk_img_scratch s = {0};
    for (int mode = 0; mode < 2; mode++) {
        uint64_t sums[2] = {0, 0};
        for (int threads = 1; threads <= 2; threads++) {
            imagenet_loader_opts o = {.batch = 5, .prefetch = threads + 1, .dopts = {.threads = threads}};
            tk_img_transform_default(&o.t, mode ? TK_IMG_EVAL : TK_IMG_TRAIN);
            o.t.out_w = o.t.out_h = 32;
            o.t.resize = 36;
            o.t.seed = 11;
            char *files[1] = {(char *)tpath("t1.tks")};
            imagenet_loader *L;
            CHECK_EQ_INT(imagenet_loader_open(&L, files, 1, &o, &e), 0);
            CHECK_EQ_INT(imagenet_loader_batches(L), mode ? 5 : 4); // eval 5+5+5+5+4; train drops 4
            for (uint32_t ep = 0; ep < 2; ep++) {
                CHECK_EQ_INT(imagenet_loader_epoch(L, ep, &e), 0);
                imagenet_batch *b;
                uint64_t nb = 0, used = 0;
                while (imagenet_loader_next(L, &b, &e) == 0 && b) {
                    CHECK_EQ_INT(b->index, nb);
                    for (size_t i = 0; i < b->n; i++) {
                        // which record is it? the one whose decode with this (seed, epoch) matches
                        int found = -1;
                        for (int rec = 0; rec < 24 && found < 0; rec++) {
                            if (mode && rec != (int)(nb * 5 + i)) continue; // eval: in order
                            tk_img_transform t = o.t;
                            t.epoch = ep;
                            const uint8_t *j = (const uint8_t *)fr.col[0].data + fr.col[0].off[rec];
                            if (tk_img_decode_one(&t, j, fr.col[0].off[rec + 1] - fr.col[0].off[rec], (uint64_t)rec, &s, want,
                                                  NULL, NULL, &e) == 0 &&
                                memcmp(want, (float *)b->images + i * per, per * 4) == 0)
                                found = rec;
                        }
                        CHECK(found >= 0);
                        if (found < 0) continue;
                        CHECK_EQ_INT(b->labels[i], ((int16_t *)fr.col[1].data)[found]);
                        CHECK(!(used >> found & 1)); // each record at most once an epoch
                        used |= 1ull << found;
                    }
                    nb++;
                    uint64_t h = 0;
                    for (size_t k = 0; k < b->n * per * 4; k += 7) h = h * 31 + ((uint8_t *)b->images)[k];
                    sums[threads - 1] = sums[threads - 1] * 131 + h;
                    imagenet_loader_done(L, b);
                }
                CHECK_EQ_INT(nb, mode ? 5 : 4);
                CHECK_EQ_INT(__builtin_popcountll(used), mode ? 24 : 20);
            }
            imagenet_loader_close(L);
        }
        CHECK(sums[0] == sums[1]); // the same batches with 1 and 2 threads
    }
    tk_img_scratch_free(&s);
    free(want);
    tks_frame_free(&fr);
}

// Windows of frames: with frames of 4 records and windows of 2 frames every record still comes
// once an epoch, and the order differs from the one-window (full permutation) order.
TK_TEST(loader_windows_cover_every_record) {
    NEED_JPEG();
    const char *dir = tree();
    char train[600];
    snprintf(train, sizeof train, "%s/train", dir);
    imagenet_scan_opts so = {0};
    tks_writer_opts wo = {.records_per_frame = 4};
    imagenet_prep_stats ps;
    tk_err e;
    CHECK_EQ_INT(imagenet_test_prep(train, &so, tpath("small.tks"), 2, &wo, &ps, &e), 0);
    uint64_t labels_sum[2] = {0, 0};
    for (int win = 0; win < 2; win++) {
        imagenet_loader_opts o = {.batch = 3, .window_frames = win ? 2 : 0, .dopts = {.threads = 2}};
        tk_img_transform_default(&o.t, TK_IMG_TRAIN);
        o.t.out_w = o.t.out_h = 8;
        char *files[2] = {(char *)tpath("small.tks"), (char *)tpath("t1.tks")}; // two shards: 48 records
        imagenet_loader *L;
        CHECK_EQ_INT(imagenet_loader_open(&L, files, 2, &o, &e), 0);
        CHECK_EQ_INT(imagenet_loader_records(L), 48);
        CHECK_EQ_INT(imagenet_loader_epoch(L, 3, &e), 0);
        imagenet_batch *b;
        int count[4] = {0};
        uint64_t h = 0;
        while (imagenet_loader_next(L, &b, &e) == 0 && b) {
            for (size_t i = 0; i < b->n; i++) count[b->labels[i]]++, h = h * 7 + (uint64_t)b->labels[i];
            imagenet_loader_done(L, b);
        }
        for (int c = 0; c < 4; c++) CHECK_EQ_INT(count[c], 12); // 48 = 16 batches of 3: nothing dropped
        labels_sum[win] = h;
        imagenet_loader_close(L);
    }
    CHECK(labels_sum[0] != labels_sum[1]);
}

TK_TEST(tfrecords_to_tks) {
    NEED_JPEG();
    const char *dir = tree();
    char jpg[600];
    snprintf(jpg, sizeof jpg, "%s/train/n01000000/n01000000_0.JPEG", dir);
    size_t jn;
    uint8_t *j = slurp(jpg, &jn);
    buf f = {0};
    for (int i = 0; i < 3; i++) {
        buf ex = example(j, jn, i + 1, i & 1, i == 2 ? NULL : "a.JPEG");
        tfrecord(&f, &ex);
        free(ex.p);
    }
    char *path = strdup(tpath("train-00000-of-00001"));
    put_file(path, f.p, f.n);
    CHECK(imagenet_is_tfrecord(path));
    CHECK(!imagenet_is_tfrecord(jpg));
    tk_err e;
    tks_schema s;
    imagenet_schema(&s, "train", NULL, 1000);
    tks_writer *w;
    CHECK_EQ_INT(tks_writer_open(&w, tpath("tf.tks"), &s, NULL, &e), 0);
    imagenet_prep_opts po = {.threads = 2, .check_decode = 1, .quality = 100, .tfrecord_classes = 1000};
    imagenet_prep_stats ps = {0};
    char *files[1] = {path};
    CHECK_EQ_INT(imagenet_prep_tfrecords(files, 1, NULL, w, &po, &ps, &e), 0);
    CHECK_EQ_INT(tks_writer_close(w, &e), 0);
    CHECK_EQ_INT(ps.records, 3);
    tks_reader *r;
    tks_frame fr = {0};
    CHECK_EQ_INT(tks_reader_open(&r, tpath("tf.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_read(r, 0, &fr, &e), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(((int16_t *)fr.col[1].data)[i], i); // label - 1
        CHECK(fr.col[0].off[i + 1] - fr.col[0].off[i] == jn &&
              memcmp((uint8_t *)fr.col[0].data + fr.col[0].off[i], j, jn) == 0); // the bytes as they are
        CHECK_EQ_INT(fr.col[4].off[i + 1] - fr.col[4].off[i], i == 2 ? 0 : 6);
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
    // corruptions: a flipped data byte, a cut file, a label outside 1..K
    char want[800];
    for (int k = 0; k < 3; k++) {
        buf g = {0};
        bput(&g, f.p, f.n);
        if (k == 0) g.p[12 + 20] ^= 1;
        if (k == 1) g.n -= 10;
        if (k == 2) {
            g.n = 0;
            buf ex = example(j, jn, 1001, 0, NULL);
            tfrecord(&g, &ex);
            free(ex.p);
        }
        put_file(path, g.p, g.n);
        free(g.p);
        CHECK_EQ_INT(tks_writer_open(&w, tpath("tf.tks"), &s, NULL, &e), 0);
        memset(&ps, 0, sizeof ps);
        CHECK_EQ_INT(imagenet_prep_tfrecords(files, 1, NULL, w, &po, &ps, &e), TK_EDATA);
        tks_writer_abort(w);
        if (k == 0) {
            snprintf(want, sizeof want, "%s: offset 12", path);
            CHECK_STR(e.where, want);
            CHECK_STR(e.what, "bad TFRecord: data checksum mismatch");
        } else if (k == 1) {
            CHECK_STR(e.what, "bad TFRecord: truncated record");
        } else {
            snprintf(want, sizeof want, "%s: offset 0", path);
            CHECK_STR(e.where, want);
            CHECK_STR(e.what, "image/class/label 1001 is outside 1..1000");
        }
    }
    free(path);
    free(f.p);
    free(j);
}

TK_TEST(zz_cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }
