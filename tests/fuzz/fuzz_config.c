// Fuzz the configuration as train-step reads it (lib/engine/config.c, cfg.c, instance.c and
// every registered workload's config parser): the input is CONFIG [NUL SETS [NUL META]], where
// CONFIG is the JSON file (read back through tk_config_load), SETS lines of "KEY=VALUE" applied as
// --set overrides, and META the training data's schema meta JSON (what DLRM takes table sizes
// from). The workload is the one the config names (the seeds hold every workload's tiny.json). A
// config that parses then gets its optimizer section parsed at a few steps per epoch and must
// give the same trajectory hash when read again from its effective JSON. Anything else must be a
// TK_EDATA (file, line or JSON path) or TK_EUSAGE (--set) error, TK_EIO only for memory.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "engine/instance.h"
#include "engine/optimizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_SETS = 16 };

static void check_code(int rc, const tk_err *e) {
    if (rc && rc != TK_EDATA && rc != TK_EUSAGE && rc != TK_EIO) abort();
    if (rc == TK_EDATA && !e->where[0] && !strstr(e->what, "fuzz")) abort(); // says where
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t clen = nul ? (size_t)(nul - data) : size;
    char path[] = "/tmp/fuzz_config.XXXXXX";
    if (fuzz_write_file(path, data, clen)) return 0;
    // SETS and META, copied NUL terminated
    char *rest = malloc(size - clen + 1);
    if (nul) memcpy(rest, nul + 1, size - clen - 1);
    rest[nul ? size - clen - 1 : 0] = 0;
    size_t rlen = nul ? size - clen - 1 : 0;
    char *meta = memchr(rest, 0, rlen) ? rest + strlen(rest) + 1 : NULL;
    char *sets[MAX_SETS];
    int nsets = 0;
    for (char *s = rest, *save = NULL; nsets < MAX_SETS && (s = strtok_r(s, "\n", &save)); s = NULL) sets[nsets++] = s;

    json_t *root;
    tk_err e = {0};
    int rc = tk_config_load(path, &root, &e);
    check_code(rc, &e);
    if (!rc) {
        tk_instance I;
        rc = tk_instance_config(&I, root, path, sets, nsets, meta, &e);
        check_code(rc, &e);
        if (!rc) {
            if (I.wl->wants_comm) I.wl->wants_comm(I.cfg);
            static const int64_t spe[] = {0, 1, 1000};
            for (size_t i = 0; i < sizeof spe / sizeof spe[0]; i++) {
                tk_opt_config oc;
                tk_err oe = {0};
                check_code(tk_optimizer_config(I.effective, path, spe[i], &oc, &oe), &oe);
            }
            // The effective config is complete: read again without overrides, it parses to the
            // same hash (what a checkpoint stores and a resumed run compares).
            json_t *again = json_deep_copy(I.effective);
            tk_instance J;
            tk_err je = {0};
            int rc2 = again ? tk_instance_config(&J, again, path, NULL, 0, meta, &je) : TK_EIO;
            if (rc2 == 0 && J.hash != I.hash) abort();
            if (rc2 && rc2 != TK_EIO) abort();
            if (again) tk_instance_destroy(&J);
            json_decref(again);
        }
        tk_instance_destroy(&I);
        json_decref(root);
    }
    free(rest);
    unlink(path);
    return 0;
}
