// Per-phase timing of BERT's step (train-step --profile): timed events on the compute stream at
// the step's phase boundaries (bert.h tk_bert_prof_mark), summed per phase name over the kept
// steps. The engine runs --profile eagerly (no graph), so the marks are recorded.
#include <stdlib.h>
#include <string.h>

#include "workloads/bert/bert.h"

#define PROF_MAX 512

struct tk_bert_prof {
    tk_event ev[PROF_MAX];
    const char *name[PROF_MAX];
    int n, in_step;
    const char *phase[64];
    double total[64];
    int phases, steps;
};

void tk_bert_profile_stop(tk_bert *m) {
    if (!m->prof) return;
    for (int k = 0; k < PROF_MAX; k++) tk_event_destroy(&m->prof->ev[k]);
    free(m->prof);
    m->prof = NULL;
}

int tk_bert_profile_start(tk_bert *m, tk_err *e) {
    if (m->prof) return 0;
    if (!(m->prof = calloc(1, sizeof *m->prof))) return tk_err_set(e, TK_EIO, "bert: out of host memory");
    for (int k = 0; k < PROF_MAX; k++)
        if (tk_event_create_timed(m->c, &m->prof->ev[k], e)) {
            tk_bert_profile_stop(m);
            return e->code;
        }
    return 0;
}

// Marks the end of phase `name` (NULL: the step's start) on the compute stream.
int tk_bert_prof_mark(tk_bert *m, const char *name, tk_err *e) {
    tk_bert_prof *P = m->prof;
    if (!P || !P->in_step || m->c->capturing || P->n >= PROF_MAX) return 0;
    P->name[P->n] = name;
    return tk_event_record(m->c, &P->ev[P->n++], TK_STREAM_COMPUTE, e);
}

void tk_bert_prof_step(tk_bert *m, int begin) {
    if (!m->prof) return;
    m->prof->in_step = begin;
    if (begin) m->prof->n = 0;
}

int tk_bert_profile_add(tk_bert *m, int keep, tk_err *e) {
    tk_bert_prof *P = m->prof;
    if (!P) return 0;
    for (int k = 1; keep && k < P->n; k++) {
        if (!P->name[k]) continue;
        double ms;
        TRY(tk_event_elapsed_ms(m->c, &P->ev[k - 1], &P->ev[k], &ms, e));
        int f = 0;
        while (f < P->phases && strcmp(P->phase[f], P->name[k]) != 0) f++;
        if (f == P->phases) {
            if (f == 64) continue;
            P->phase[P->phases++] = P->name[k];
        }
        P->total[f] += ms;
    }
    if (keep && P->n > 0) P->steps++;
    P->n = 0;
    return 0;
}

json_t *tk_bert_profile_json(const tk_bert *m) {
    const tk_bert_prof *P = m->prof;
    if (!P) return NULL;
    json_t *ms = json_object();
    for (int f = 0; f < P->phases; f++)
        json_object_set_new(ms, P->phase[f], json_real(P->steps ? P->total[f] / P->steps : 0));
    return json_pack("{s:i, s:o}", "steps", P->steps, "ms", ms);
}
