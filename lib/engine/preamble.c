// The MLLOG preamble of a run (preamble.h).
#include "engine/preamble.h"

int tk_engine_preamble(tk_mllog *L, const tk_instance *I, const char *org, const char *platform, int64_t train_samples,
                       int64_t eval_samples, tk_err *e) {
    const tk_workload *wl = I->wl;
    const tk_run_cfg *rc = &I->run;
    TRY(TK_MLLOG_EVENT(L, "submission_benchmark", json_string(wl->name), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_org", json_string(org), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_division", json_string("closed"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_status", json_string("research"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_platform", json_string(platform), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "seed", json_integer((json_int_t)rc->seed), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "global_batch_size", json_integer(rc->batch), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "gradient_accumulation_steps", json_integer(1), NULL, e));
    if (wl->mllog_hparams) TRY(wl->mllog_hparams(I->model, rc, L, e));
    TRY(TK_MLLOG_EVENT(L, "train_samples", json_integer(train_samples), NULL, e));
    if (eval_samples >= 0) TRY(TK_MLLOG_EVENT(L, "eval_samples", json_integer(eval_samples), NULL, e));
    return wl->mllog_weights ? wl->mllog_weights(I->model, L, e) : 0;
}
