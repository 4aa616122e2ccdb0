// Fuzz prep kits19's two small readers of outside text: the evaluation list
// (evaluation_cases.txt) and checksum.json. Any input must load or give an error naming the file,
// never crash; a loaded list has no empty line and line numbers that increase; a loaded checksum
// file maps every name to 32 hex digits.
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "kits19/kits19.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_kits19.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_err e;
    kits19_eval_list l;
    if (kits19_eval_list_load(&l, path, &e) == 0) {
        for (int i = 0; i < l.n; i++) {
            if (!l.key[i][0] || strchr(l.key[i], '\n')) abort();
            if (i > 0 && l.line[i] <= l.line[i - 1]) abort();
        }
    } else if (!strstr(e.what, path) && !strstr(e.where, path)) {
        abort();
    }
    kits19_eval_list_free(&l);
    json_t *j = NULL;
    if (kits19_checksum_load(&j, path, &e) == 0) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            const char *h = json_string_value(v);
            if (!h || strlen(h) != 32) abort();
            for (int i = 0; i < 32; i++)
                if (!isxdigit((unsigned char)h[i])) abort();
        }
        json_decref(j);
    } else if (!strstr(e.where, path)) {
        abort();
    }
    unlink(path);
    return 0;
}
