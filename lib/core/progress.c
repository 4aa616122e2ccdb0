#include "core/progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double tk_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tk_progress_init(tk_progress *p, const char *label, const char *unit, uint64_t total, int force) {
    memset(p, 0, sizeof *p);
    p->on = force || isatty(STDERR_FILENO);
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->total = total;
    p->t0 = p->last = tk_now();
}

static void draw(tk_progress *p, uint64_t done, double now, int final) {
    double dt = now - p->t0;
    double rate = dt > 0 ? (double)done / dt : 0;
    if (p->total) {
        double eta = rate > 0 && p->total > done ? (double)(p->total - done) / rate : 0;
        fprintf(stderr, "\r%s: %llu/%llu %s (%.1f%%) %.0f %s/s ETA %.0fs\033[K", p->label,
                (unsigned long long)done, (unsigned long long)p->total, p->unit,
                100.0 * (double)done / (double)p->total, rate, p->unit, eta);
    } else {
        fprintf(stderr, "\r%s: %llu %s %.0f %s/s %.0fs\033[K", p->label, (unsigned long long)done,
                p->unit, rate, p->unit, dt);
    }
    if (final) fputc('\n', stderr);
}

void tk_progress_update(tk_progress *p, uint64_t done) {
    if (!p->on) return;
    double now = tk_now();
    if (now - p->last < 0.2) return;
    p->last = now;
    draw(p, done, now, 0);
}

void tk_progress_end(tk_progress *p, uint64_t done) {
    if (!p->on) return;
    draw(p, done, tk_now(), 1);
}
