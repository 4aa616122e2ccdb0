// Per-phase timing of DLRM's step (profile.h).
#include <stdlib.h>
#include <string.h>

#include "workloads/dlrm/profile.h"

void tk_dlrm_profile_stop(tk_dlrm *m) {
    if (!m->prof) return;
    for (int k = 0; k < TK_DLRM_PROF_MAX; k++) tk_event_destroy(&m->prof->ev[k]);
    free(m->prof);
    m->prof = NULL;
}

int tk_dlrm_profile_start(tk_dlrm *m, tk_err *e) {
    if (m->prof) return 0;
    if (!(m->prof = calloc(1, sizeof *m->prof))) return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    for (int k = 0; k < TK_DLRM_PROF_MAX; k++)
        if (tk_event_create_timed(m->c, &m->prof->ev[k], e)) {
            tk_dlrm_profile_stop(m);
            return e->code;
        }
    return 0;
}

int tk_dlrm_prof_mark(tk_dlrm *m, const char *name, int stream, tk_err *e) {
    tk_dlrm_prof *P = m->prof;
    if (!P || !P->in_step || m->c->capturing || P->n >= TK_DLRM_PROF_MAX) return 0;
    P->name[P->n] = name;
    P->stream[P->n] = stream;
    return tk_event_record(m->c, &P->ev[P->n++], stream, e);
}

void tk_dlrm_prof_step(tk_dlrm *m, int begin) {
    if (m->prof) {
        m->prof->in_step = begin;
        if (begin) m->prof->n = 0;
    }
}

int tk_dlrm_profile_add(tk_dlrm *m, int keep, tk_err *e) {
    tk_dlrm_prof *P = m->prof;
    if (!P) return 0;
    for (int k = 0; keep && k < P->n; k++) {
        if (!P->name[k]) continue;
        int j = k - 1;
        while (j >= 0 && P->stream[j] != P->stream[k]) j--;
        if (j < 0) continue;
        double ms;
        TRY(tk_event_elapsed_ms(m->c, &P->ev[j], &P->ev[k], &ms, e));
        int f = 0;
        while (f < P->phases && strcmp(P->phase[f], P->name[k]) != 0) f++;
        if (f == P->phases) {
            if (f == TK_DLRM_PROF_MAX) continue;
            P->phase[P->phases++] = P->name[k];
        }
        P->total[f] += ms;
    }
    if (keep && P->n > 0) P->steps++;
    P->n = 0;
    return 0;
}

json_t *tk_dlrm_profile_json(const tk_dlrm *m) {
    const tk_dlrm_prof *P = m->prof;
    if (!P) return NULL;
    json_t *ms = json_object();
    for (int f = 0; f < P->phases; f++)
        json_object_set_new(ms, P->phase[f], json_real(P->steps ? P->total[f] / P->steps : 0));
    return json_pack("{s:i, s:o}", "steps", P->steps, "ms", ms);
}

