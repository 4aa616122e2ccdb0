// Per-phase step timing (profile.h).
#include "engine/profile.h"

#include <stdlib.h>
#include <string.h>

struct tk_prof {
    int max, n, in_step;   // marks: the capacity, this step's, inside a step
    tk_event *ev;          // max each
    const char **name;     // the phase a mark ends; NULL: a mark that only starts one
    int *stream;
    const char **phase;    // the phases in the order they first ran, their totals
    double *total;
    int phases, steps;
};

void tk_prof_stop(tk_prof **P) {
    tk_prof *p = *P;
    if (!p) return;
    for (int k = 0; p->ev && k < p->max; k++) tk_event_destroy(&p->ev[k]);
    free(p->ev), free(p->name), free(p->stream), free(p->phase), free(p->total);
    free(p);
    *P = NULL;
}

int tk_prof_start(tk_ctx *c, int max_marks, const char *who, tk_prof **P, tk_err *e) {
    if (*P) return 0;
    tk_prof *p = calloc(1, sizeof *p);
    if (!p) return tk_err_set(e, TK_EIO, "%s: out of host memory", who);
    *P = p;
    p->max = max_marks;
    p->ev = calloc((size_t)max_marks, sizeof *p->ev);
    p->name = calloc((size_t)max_marks, sizeof *p->name);
    p->stream = calloc((size_t)max_marks, sizeof *p->stream);
    p->phase = calloc((size_t)max_marks, sizeof *p->phase);
    p->total = calloc((size_t)max_marks, sizeof *p->total);
    if (!p->ev || !p->name || !p->stream || !p->phase || !p->total) {
        tk_prof_stop(P);
        return tk_err_set(e, TK_EIO, "%s: out of host memory", who);
    }
    for (int k = 0; k < max_marks; k++)
        if (tk_event_create_timed(c, &p->ev[k], e)) {
            tk_prof_stop(P);
            return e->code;
        }
    return 0;
}

void tk_prof_step(tk_prof *P, int begin) {
    if (!P) return;
    P->in_step = begin;
    if (begin) P->n = 0;
}

int tk_prof_mark(tk_prof *P, tk_ctx *c, const char *name, int stream, tk_err *e) {
    if (!P || !P->in_step || c->capturing || P->n >= P->max) return 0;
    P->name[P->n] = name;
    P->stream[P->n] = stream;
    return tk_event_record(c, &P->ev[P->n++], stream, e);
}

int tk_prof_add(tk_prof *P, tk_ctx *c, int keep, tk_err *e) {
    if (!P) return 0;
    for (int k = 0; keep && k < P->n; k++) {
        if (!P->name[k]) continue;
        int j = k - 1;
        while (j >= 0 && P->stream[j] != P->stream[k]) j--;
        if (j < 0) continue;
        double ms;
        TRY(tk_event_elapsed_ms(c, &P->ev[j], &P->ev[k], &ms, e));
        int f = 0;
        while (f < P->phases && strcmp(P->phase[f], P->name[k]) != 0) f++;
        if (f == P->phases) {
            if (f == P->max) continue;
            P->phase[P->phases++] = P->name[k];
        }
        P->total[f] += ms;
    }
    if (keep && P->n > 0) P->steps++;
    P->n = 0;
    return 0;
}

json_t *tk_prof_json(const tk_prof *P) {
    if (!P) return NULL;
    json_t *ms = json_object();
    for (int f = 0; f < P->phases; f++)
        json_object_set_new(ms, P->phase[f], json_real(P->steps ? P->total[f] / P->steps : 0));
    return json_pack("{s:i, s:o}", "steps", P->steps, "ms", ms);
}
