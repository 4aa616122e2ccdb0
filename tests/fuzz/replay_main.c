// Replays a fuzz corpus through a target's LLVMFuzzerTestOneInput without libFuzzer, so that
// `make check` (gcc only) runs every saved input. Usage: fuzz_X-replay FILE_OR_DIR...
// Prints one TAP line per input; a crash fails the whole test run. Built with a sanitizer
// (make san-replay), an AddressSanitizer finding prints "not ok" naming the input before the
// sanitizer exits; UBSan's runtime calls no such callback: its input is the one after the last "ok".
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n;
static const char *current; // the input being replayed

// The sanitizers' runtime (when linked) calls this before it ends the process on a finding.
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void on_death(void) {
    if (current) printf("not ok %d - %s (sanitizer finding above)\n", ++n, current);
    fflush(stdout);
}

static void run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("not ok %d - %s (cannot open)\n", ++n, path);
        return;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
    size_t got = fread(buf, 1, (size_t)(sz > 0 ? sz : 0), f);
    fclose(f);
    current = path;
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, got);
    current = NULL;
    free(buf);
    printf("ok %d - %s\n", ++n, path);
}

static void walk(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        run_file(path);
        return;
    }
    struct dirent **ents;
    int k = scandir(path, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        if (ents[i]->d_name[0] != '.') {
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, ents[i]->d_name);
            walk(sub);
        }
        free(ents[i]);
    }
    if (k >= 0) free(ents);
}

int main(int argc, char **argv) {
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_death);
    for (int i = 1; i < argc; i++) walk(argv[i]);
    return 0;
}
