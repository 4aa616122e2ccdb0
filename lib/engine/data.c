// Dataset paths and the first file's schema meta (data.h).
#include "engine/data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tks/tks.h"

static int add(char ***list, int *n, const char *p, tk_err *e) {
    char **np = realloc(*list, (size_t)(*n + 1) * sizeof *np);
    if (!np) return tk_err_set(e, TK_EIO, "out of memory");
    *list = np;
    if (!(np[*n] = strdup(p))) return tk_err_set(e, TK_EIO, "out of memory");
    (*n)++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int expand(char ***list, int *n, const char *p, tk_err *e) {
    struct stat st;
    if (stat(p, &st) != 0) return tk_err_errno(e, errno, "%s: cannot open", p);
    if (!S_ISDIR(st.st_mode)) return add(list, n, p, e);
    DIR *dir = opendir(p);
    if (!dir) return tk_err_errno(e, errno, "%s: cannot open directory", p);
    int first = *n, rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(dir))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".tks") != 0 || de->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", p, de->d_name);
        rc = add(list, n, full, e);
    }
    closedir(dir);
    if (rc) return rc;
    if (*n == first) return tk_err_set(e, TK_EDATA, "%s: no .tks files in the directory", p);
    qsort(*list + first, (size_t)(*n - first), sizeof **list, cmp_str);
    return 0;
}

int tk_data_paths(char *const *paths, int npaths, char ***out, int *nout, tk_err *e) {
    char **list = NULL;
    int n = 0, rc = 0;
    for (int i = 0; !rc && i < npaths; i++) rc = expand(&list, &n, paths[i], e);
    if (!rc && n == 0) rc = tk_err_set(e, TK_EUSAGE, "no input files");
    if (rc) {
        tk_data_paths_free(list, n);
        return rc;
    }
    *out = list;
    *nout = n;
    return 0;
}

void tk_data_paths_free(char **list, int n) {
    for (int i = 0; list && i < n; i++) free(list[i]);
    free(list);
}

int tk_data_meta(char *const *paths, int npaths, char **meta, tk_err *e) {
    char **list;
    int n;
    *meta = NULL;
    TRY(tk_data_paths(paths, npaths, &list, &n, e));
    tks_reader *r;
    int rc = tks_reader_open(&r, list[0], e);
    if (!rc) {
        const char *m = tks_reader_schema(r)->meta_json;
        *meta = strdup(m && *m ? m : "{}");
        if (!*meta) rc = tk_err_set(e, TK_EIO, "out of memory");
        tks_reader_close(r);
    }
    tk_data_paths_free(list, n);
    return rc;
}
