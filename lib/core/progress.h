// Progress for people on stderr: shown only when stderr is a terminal (or forced with
// --progress), redrawn at most 5 times a second, with rate and ETA. Never touches stdout.
#ifndef TK_PROGRESS_H
#define TK_PROGRESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_progress {
    int on;
    char label[32];
    char unit[16];
    uint64_t total;    // 0 = unknown (no ETA)
    double t0, last;
} tk_progress;

// force: 1 = always show, 0 = show when stderr is a terminal.
void tk_progress_init(tk_progress *p, const char *label, const char *unit, uint64_t total, int force);
void tk_progress_update(tk_progress *p, uint64_t done);
void tk_progress_end(tk_progress *p, uint64_t done);
// Monotonic seconds.
double tk_now(void);

#ifdef __cplusplus
}
#endif

#endif
