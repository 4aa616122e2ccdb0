// coco-eval: COCO detection metrics (bbox, segm) identical to pycocotools, from a ground-truth
// annotation file and a result file. Thin over lib/coco.
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco.h"
#include "core/cli.h"
#include "core/jsonl.h"

static const char *prog = "coco-eval";
static const char *usage =
    "Usage: coco-eval --gt GT.json --dt RESULTS.json [--iou-type bbox|segm]... [--json]\n"
    "                 [--per-category] [--max-dets A,B,C] [--no-use-cats] [--img-ids LIST]\n"
    "                 [--cat-ids LIST] [--area-ranges LO:HI,LO:HI,LO:HI,LO:HI] [--threads N]\n"
    "                 [--allow-empty] [--drop-unknown-images]\n";

static void help(void) {
    printf("%s", usage);
    printf("\nCOCO detection metrics, the same numbers and text as pycocotools' COCOeval.\n\n"
           "  -g, --gt FILE            ground truth (COCO annotation file; - for stdin)\n"
           "  -d, --dt FILE            results (COCO result list: boxes, RLE or polygon masks)\n"
           "  -t, --iou-type TYPE      bbox (default) or segm; repeat for both\n"
           "  -j, --json               one JSON line per IoU type instead of the summary text\n"
           "  -p, --per-category       add AP and AP50 per category\n"
           "      --max-dets LIST      maxDets (3 or more values; default 1,10,100)\n"
           "      --no-use-cats        pool all categories (useCats = 0)\n"
           "      --img-ids LIST       evaluate these image ids only\n"
           "      --cat-ids LIST       evaluate these category ids only\n"
           "      --area-ranges LIST   all,small,medium,large as LO:HI (default\n"
           "                           0:1e10,0:1024,1024:9216,9216:1e10)\n"
           "  -T, --threads N          worker threads (default: all cores)\n"
           "      --allow-empty        score an empty result list as no detections\n"
           "      --drop-unknown-images  drop results for images absent from the ground truth\n"
           "  -h, --help               this help\n"
           "  -V, --version            version\n"
           "\nExit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error, 70 internal error.\n");
}

enum { O_MAXDETS = 256, O_NOCATS, O_IMGS, O_CATS, O_AREAS, O_EMPTY, O_DROP };

static int parse_list(const char *s, const char *opt, int64_t lo, int64_t hi, int64_t **out, int *n,
                      tk_err *e) {
    int cap = 1;
    for (const char *q = s; *q; q++) cap += *q == ',';
    *out = malloc((size_t)cap * sizeof **out);
    if (!*out) return tk_err_set(e, TK_EIO, "out of memory");
    return tk_parse_i64_list(s, lo, hi, opt, *out, cap, n, e);
}

static int parse_areas(const char *s, double rng[4][2], tk_err *e) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (n == 4 || !colon)
            return tk_err_set(e, TK_EUSAGE, "--area-ranges: expected 4 ranges LO:HI (all, small, medium, large), got '%s'", s);
        *colon = 0;
        TRY(tk_parse_f64(tok, 0, 1e300, "--area-ranges", &rng[n][0], e));
        TRY(tk_parse_f64(colon + 1, 0, 1e300, "--area-ranges", &rng[n][1], e));
        n++;
    }
    if (n != 4)
        return tk_err_set(e, TK_EUSAGE, "--area-ranges: expected 4 ranges LO:HI (all, small, medium, large), got '%s'", s);
    return 0;
}

static json_t *result_json(const coco_gt *gt, const coco_result *r, const char *type) {
    json_t *o = json_object(), *st = json_array(), *pc = json_object();
    json_object_set_new(o, "type", json_string("coco"));
    json_object_set_new(o, "iou_type", json_string(type));
    for (int i = 0; i < 12; i++) json_array_append_new(st, json_real(r->stats[i]));
    json_object_set_new(o, "stats", st);
    for (int k = 0; k < r->K; k++) {
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)r->cat_ids[k]);
        json_t *c = json_object();
        size_t nl = 0;
        const char *name = coco_gt_cat_name(gt, r->cat_ids[k], &nl);
        if (name) json_object_set_new(c, "name", json_stringn(name, nl));
        json_object_set_new(c, "ap", json_real(r->ap[k]));
        json_object_set_new(c, "ap50", json_real(r->ap50[k]));
        json_object_set_new(pc, key, c);
    }
    json_object_set_new(o, "per_category", pc);
    return o;
}

static void print_per_category(const coco_gt *gt, const coco_result *r) {
    printf(" Per-category AP @[ IoU=0.50:0.95 and 0.50 | area=   all | maxDets=%3d ]\n",
           r->max_dets[r->M - 1]);
    printf(" %8s  %-20s %7s %7s\n", "id", "name", "AP", "AP50");
    for (int k = 0; k < r->K; k++) {
        size_t nl = 0;
        const char *name = coco_gt_cat_name(gt, r->cat_ids[k], &nl);
        printf(" %8lld  %-20.*s %7.3f %7.3f\n", (long long)r->cat_ids[k], name ? (int)nl : 1,
               name ? name : "-", r->ap[k], r->ap50[k]);
    }
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"gt", required_argument, 0, 'g'},       {"dt", required_argument, 0, 'd'},
        {"iou-type", required_argument, 0, 't'}, {"json", no_argument, 0, 'j'},
        {"per-category", no_argument, 0, 'p'},   {"threads", required_argument, 0, 'T'},
        {"max-dets", required_argument, 0, O_MAXDETS}, {"no-use-cats", no_argument, 0, O_NOCATS},
        {"img-ids", required_argument, 0, O_IMGS}, {"cat-ids", required_argument, 0, O_CATS},
        {"area-ranges", required_argument, 0, O_AREAS}, {"allow-empty", no_argument, 0, O_EMPTY},
        {"drop-unknown-images", no_argument, 0, O_DROP}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},        {0, 0, 0, 0}};
    const char *gt_path = NULL, *dt_path = NULL;
    int types[2], ntypes = 0, json = 0, per_cat = 0, use_cats = 1, flags = 0;
    int64_t threads = 0, *img_ids = NULL, *cat_ids = NULL, *md = NULL;
    int n_img = 0, n_cat = 0, n_md = 0, have_areas = 0;
    double areas[4][2];
    tk_err e = {0};
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, ":g:d:t:jpT:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'g': gt_path = optarg; break;
        case 'd': dt_path = optarg; break;
        case 't': {
            int t;
            if (!strcmp(optarg, "bbox")) t = COCO_BBOX;
            else if (!strcmp(optarg, "segm")) t = COCO_SEGM;
            else if (!strcmp(optarg, "keypoints"))
                return tk_cli_usage_error(prog, usage, "--iou-type keypoints is not supported (bbox and segm are)");
            else return tk_cli_usage_error(prog, usage, "--iou-type: expected bbox or segm, got '%s'", optarg);
            int dup = 0;
            for (int i = 0; i < ntypes; i++) dup |= types[i] == t;
            if (!dup) types[ntypes++] = t;
            break;
        }
        case 'j': json = 1; break;
        case 'p': per_cat = 1; break;
        case 'T': rc = tk_parse_i64(optarg, 1, 4096, "--threads", &threads, &e); break;
        case O_MAXDETS:
            free(md);
            rc = parse_list(optarg, "--max-dets", 1, 1000000, &md, &n_md, &e);
            if (!rc && (n_md < 3 || n_md > COCO_MAX_MAXDETS))
                rc = tk_err_set(&e, TK_EUSAGE, "--max-dets: expected 3 to %d values, got %d", COCO_MAX_MAXDETS, n_md);
            break;
        case O_NOCATS: use_cats = 0; break;
        case O_IMGS:
            free(img_ids);
            rc = parse_list(optarg, "--img-ids", INT64_MIN, INT64_MAX, &img_ids, &n_img, &e);
            break;
        case O_CATS:
            free(cat_ids);
            rc = parse_list(optarg, "--cat-ids", INT64_MIN, INT64_MAX, &cat_ids, &n_cat, &e);
            break;
        case O_AREAS: rc = parse_areas(optarg, areas, &e), have_areas = 1; break;
        case O_EMPTY: flags |= COCO_DT_ALLOW_EMPTY; break;
        case O_DROP: flags |= COCO_DT_DROP_UNKNOWN; break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) break;
    }
    if (rc || optind < argc || !gt_path || !dt_path) {
        free(img_ids);
        free(cat_ids);
        free(md);
        if (rc) return tk_cli_usage_error(prog, usage, "%s", e.what);
        if (optind < argc) return tk_cli_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
        return tk_cli_usage_error(prog, usage, "--gt and --dt are required");
    }
    if (!ntypes) types[ntypes++] = COCO_BBOX;

    coco_gt *gt = NULL;
    coco_dt *dt = NULL;
    if ((rc = coco_gt_load(gt_path, &gt, &e)) || (rc = coco_dt_load(gt, dt_path, flags, (int)threads, &dt, &e))) {
        coco_gt_free(gt);
        return tk_cli_fail(prog, &e);
    }
    for (int i = 0; i < ntypes && !rc; i++) {
        coco_params p;
        coco_params_default(&p, (coco_iou_type)types[i]);
        p.use_cats = use_cats;
        p.n_threads = (int)threads;
        if (img_ids) p.img_ids = img_ids, p.n_img_ids = (size_t)n_img;
        if (cat_ids) p.cat_ids = cat_ids, p.n_cat_ids = (size_t)n_cat;
        if (md) {
            p.n_max_dets = n_md;
            for (int j = 0; j < n_md; j++) p.max_dets[j] = (int)md[j];
        }
        if (have_areas) memcpy(p.area_rng, areas, sizeof areas);
        coco_result r;
        if ((rc = coco_evaluate(gt, dt, &p, &r, &e))) break;
        const char *tname = types[i] == COCO_SEGM ? "segm" : "bbox";
        if (json) {
            rc = tk_jsonl_emit(stdout, result_json(gt, &r, tname), &e);
        } else {
            char text[2048];
            coco_format_summary(&r, &p, text, sizeof text);
            if (ntypes > 1) printf("IoU metric: %s\n", tname);
            fputs(text, stdout);
            if (per_cat) print_per_category(gt, &r);
        }
        coco_result_free(&r);
    }
    coco_dt_free(dt);
    coco_gt_free(gt);
    free(img_ids);
    free(cat_ids);
    free(md);
    if (!rc) rc = tk_cli_close_stdout(&e);
    return rc ? tk_cli_fail(prog, &e) : 0;
}
