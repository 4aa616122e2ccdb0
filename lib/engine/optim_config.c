// The optimizer section of a configuration (lib/engine/optim_config.h, trainkit-optimizer(5)).
// Every key is described once in the table below: which optimizers and schedules it belongs to;
// a key outside its row's sets, or in no row, is refused with the file and JSON path.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/optim_config.h"

static const char *const opt_names[] = {"sgd", "adam", "adamw", "lamb", "lars"};
static const tk_opt_kind opt_kinds[] = {TK_OPT_SGD, TK_OPT_ADAM, TK_OPT_ADAMW, TK_OPT_LAMB, TK_OPT_LARS};
static const char *const sched_names[] = {"poly", "warmup_poly", "lars_poly", "step", "cosine", "warmup_hold_exp"};
static const tk_lr_kind sched_kinds[] = {TK_LR_POLY, TK_LR_WARMUP_POLY, TK_LR_LARS_POLY, TK_LR_STEP, TK_LR_COSINE,
                                         TK_LR_WARMUP_HOLD_EXP};
#define NOPT 5
#define NSCHED 6

// Bit sets over opt_names / sched_names.
enum { O_SGD = 1, O_ADAM = 2, O_ADAMW = 4, O_LAMB = 8, O_LARS = 16, O_ALL = 31, O_MOMENTS = O_ADAM | O_ADAMW | O_LAMB };
enum { S_POLY = 1, S_WPOLY = 2, S_LARS = 4, S_STEP = 8, S_COS = 16, S_EXP = 32, S_ALL = 63 };

static const struct keydesc {
    const char *key;
    unsigned opts, scheds;
} keys[] = {
    {"name", O_ALL, S_ALL},
    {"base_lr", O_ALL, S_ALL},
    {"lr_schedule", O_ALL, S_ALL},
    {"weight_decay", O_ALL, S_ALL},
    {"max_grad_norm", O_ALL, S_ALL},
    {"skip_nonfinite", O_ALL, S_ALL},
    {"ema", O_ALL, S_ALL},
    {"distributed", O_ALL, S_ALL},
    {"momentum", O_SGD | O_LARS, S_ALL},
    {"dampening", O_SGD, S_ALL},
    {"nesterov", O_SGD | O_LARS, S_ALL},
    {"beta1", O_MOMENTS, S_ALL},
    {"beta2", O_MOMENTS, S_ALL},
    {"eps", O_MOMENTS | O_LARS, S_ALL},
    {"bias_correction", O_MOMENTS, S_ALL},
    {"trust_coef", O_LARS, S_ALL},
    {"warmup_steps", O_ALL, S_ALL & ~S_EXP},
    {"warmup_epochs", O_ALL, S_LARS | S_COS | S_STEP | S_EXP},
    {"warmup_init_lr", O_ALL, S_POLY | S_STEP | S_COS},
    {"warmup_per_epoch", O_ALL, S_POLY | S_STEP | S_COS},
    {"decay_start_step", O_ALL, S_POLY},
    {"decay_steps", O_ALL, S_POLY},
    {"poly_power", O_ALL, S_POLY | S_WPOLY | S_LARS},
    {"min_lr", O_ALL, S_POLY | S_EXP},
    {"start_warmup_step", O_ALL, S_WPOLY},
    {"total_steps", O_ALL, S_WPOLY | S_LARS | S_COS},
    {"total_epochs", O_ALL, S_LARS | S_COS},
    {"end_lr", O_ALL, S_WPOLY | S_LARS | S_COS},
    {"milestones", O_ALL, S_STEP},
    {"milestone_epochs", O_ALL, S_STEP},
    {"gamma", O_ALL, S_STEP | S_EXP},
    {"hold_epochs", O_ALL, S_EXP},
};

// Step counts are at most 2^40 (a trillion updates), so the schedule's integer arithmetic cannot
// overflow.
#define MAX_STEPS ((int64_t)1 << 40)

typedef struct {
    const json_t *obj;
    const char *file, *jpath;
    tk_err *e;
} ctx;

// Names where the error is ("FILE: $.optimizer.KEY", or the object itself when key is NULL).
static int at(const ctx *c, const char *key) {
    if (key) tk_err_where(c->e, "%s: $.%s.%s", c->file, c->jpath, key);
    else tk_err_where(c->e, "%s: $.%s", c->file, c->jpath);
    return TK_EDATA;
}
#define bad(c, key, ...) (tk_err_set((c)->e, TK_EDATA, __VA_ARGS__), at((c), (key)))

static int pick(const ctx *c, const char *key, const char *const *names, int n, const char *dflt, int *out) {
    const json_t *v = json_object_get(c->obj, key);
    const char *s = v ? json_string_value(v) : dflt;
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) return *out = i, 0;
    char list[200] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", names[i]);
    if (!v) return bad(c, key, "missing; expected one of %s", list);
    return bad(c, key, "expected one of %s", list);
}

// A number in [lo, hi] (hi_open: [lo, hi)); absent: dflt, or an error when dflt is NaN.
static int num(const ctx *c, const char *key, double lo, double hi, int hi_open, double dflt, double *out) {
    const json_t *v = json_object_get(c->obj, key);
    if (!v) {
        if (isnan(dflt)) return bad(c, key, "missing; expected a number in [%g, %g%c", lo, hi, hi_open ? ')' : ']');
        return *out = dflt, 0;
    }
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= lo && (hi_open ? x < hi : x <= hi)))
        return bad(c, key, "expected a number in [%g, %g%c", lo, hi, hi_open ? ')' : ']');
    return *out = x, 0;
}

// An integer in [lo, hi]; absent: dflt (INT64_MIN: required).
static int integer(const ctx *c, const char *key, int64_t lo, int64_t hi, int64_t dflt, int64_t *out) {
    const json_t *v = json_object_get(c->obj, key);
    if (!v) {
        if (dflt == INT64_MIN)
            return bad(c, key, "missing; expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return *out = dflt, 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bad(c, key, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    return *out = json_integer_value(v), 0;
}

static int boolean(const ctx *c, const char *key, int dflt, int *out) {
    const json_t *v = json_object_get(c->obj, key);
    if (!v) return *out = dflt, 0;
    if (!json_is_boolean(v)) return bad(c, key, "expected true or false");
    return *out = json_is_true(v), 0;
}

// A step count given either as KEY_steps or as KEY_epochs (times steps_per_epoch, to the
// nearest integer). required: one of the two must be there. epochs_out: the epochs as given, -1.
static int steps_or_epochs(const ctx *c, const char *skey, const char *ekey, int64_t spe, int required,
                           int64_t *out, double *epochs_out) {
    const json_t *s = json_object_get(c->obj, skey), *ep = ekey ? json_object_get(c->obj, ekey) : NULL;
    *epochs_out = -1;
    if (s && ep) return bad(c, ekey, "give %s or %s, not both", skey, ekey);
    if (!ep) return integer(c, skey, 0, MAX_STEPS, required ? INT64_MIN : 0, out);
    double x;
    TRY(num(c, ekey, 0, 1e6, 0, NAN, &x));
    if (spe <= 0) return bad(c, ekey, "epochs need the steps per epoch, which this workload does not give; use %s", skey);
    double st = round(x * (double)spe);
    if (st > (double)MAX_STEPS) return bad(c, ekey, "%g epochs of %lld steps is too many steps", x, (long long)spe);
    *epochs_out = x;
    *out = (int64_t)st;
    return 0;
}

static int milestones(const ctx *c, int64_t spe, tk_lr_sched *s) {
    const json_t *st = json_object_get(c->obj, "milestones"), *ep = json_object_get(c->obj, "milestone_epochs");
    const char *key = ep ? "milestone_epochs" : "milestones";
    const json_t *a = ep ? ep : st;
    if (st && ep) return bad(c, key, "give milestones or milestone_epochs, not both");
    if (!a) return bad(c, key, "missing; expected an array of update indices");
    if (!json_is_array(a) || json_array_size(a) > TK_LR_MAX_MILESTONES)
        return bad(c, key, "expected an array of at most %d increasing %s", TK_LR_MAX_MILESTONES,
                   ep ? "epoch counts" : "update indices");
    if (ep && spe <= 0) return bad(c, key, "epochs need the steps per epoch, which this workload does not give; use milestones");
    s->nmilestones = (int)json_array_size(a);
    for (int i = 0; i < s->nmilestones; i++) {
        const json_t *x = json_array_get(a, i);
        double v = ep ? json_number_value(x) * (double)spe : (double)json_integer_value(x);
        int ok = ep ? json_is_number(x) && v >= 0 && v <= (double)MAX_STEPS : json_is_integer(x) && v >= 0 && v <= (double)MAX_STEPS;
        s->milestones[i] = ok ? (int64_t)round(v) : -1;
        if (!ok || (i > 0 && s->milestones[i] <= s->milestones[i - 1]))
            return bad(c, key, "element %d: expected increasing %s in [0, 2^40 updates]", i,
                       ep ? "epoch counts" : "integers");
    }
    return 0;
}

#define NKEYS (sizeof keys / sizeof keys[0])
_Static_assert(NKEYS <= 32, "tk_opt_config.given_int has a bit per key");

static int key_index(const char *k) {
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(k, keys[i].key) == 0) return (int)i;
    return -1;
}

int tk_opt_config_given_int(const tk_opt_config *cfg, const char *key) {
    int i = key_index(key);
    return i >= 0 && (cfg->given_int >> i & 1);
}

// Checks every key of the section against its optimizer and schedule, and notes which were
// written as integers.
static int check_keys(const ctx *c, int oi, int si, uint32_t *given_int) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)c->obj, k, v) {
        int i = key_index(k);
        const struct keydesc *d = i >= 0 ? &keys[i] : NULL;
        if (!d) return bad(c, k, "unknown key \"%s\"", k);
        if (json_is_integer(v)) *given_int |= 1u << i;
        if (!(d->opts >> oi & 1)) return bad(c, k, "\"%s\" is not a key of optimizer \"%s\"", k, opt_names[oi]);
        if (!(d->scheds >> si & 1))
            return bad(c, k, "\"%s\" is not a key of lr_schedule \"%s\"", k, sched_names[si]);
    }
    return 0;
}

static int parse_hp(const ctx *c, int oi, tk_opt_hp *hp) {
    static const double wd_dflt[NOPT] = {0, 0, 0.01, 0.01, 1e-4}, eps_dflt[NOPT] = {0, 1e-8, 1e-8, 1e-6, 0};
    tk_opt_kind k = opt_kinds[oi];
    memset(hp, 0, sizeof *hp);
    hp->kind = k;
    TRY(num(c, "weight_decay", 0, 1e6, 1, wd_dflt[oi], &hp->weight_decay));
    TRY(num(c, "max_grad_norm", 0, 1e30, 1, k == TK_OPT_LAMB ? 1.0 : 0.0, &hp->max_grad_norm));
    TRY(boolean(c, "skip_nonfinite", 0, &hp->skip_nonfinite));
    TRY(num(c, "eps", 0, 1, 1, eps_dflt[oi], &hp->eps));
    if (k == TK_OPT_SGD || k == TK_OPT_LARS) {
        TRY(num(c, "momentum", 0, 1, 1, k == TK_OPT_LARS ? 0.9 : 0.0, &hp->momentum));
        TRY(num(c, "dampening", 0, 1, 0, 0, &hp->dampening));
        TRY(boolean(c, "nesterov", 0, &hp->nesterov));
        if (k == TK_OPT_SGD && hp->momentum > 0) hp->kind = TK_OPT_MOMENTUM;
        if (hp->nesterov && (!(hp->momentum > 0) || hp->dampening != 0))
            return bad(c, "nesterov", "nesterov needs momentum > 0 and dampening 0");
        if (k == TK_OPT_SGD && hp->momentum == 0 && hp->dampening != 0)
            return bad(c, "dampening", "dampening needs momentum > 0");
    } else {
        TRY(num(c, "beta1", 0, 1, 1, 0.9, &hp->beta1));
        TRY(num(c, "beta2", 0, 1, 1, 0.999, &hp->beta2));
        TRY(boolean(c, "bias_correction", 1, &hp->bias_correction));
    }
    if (k == TK_OPT_LARS) TRY(num(c, "trust_coef", 0, 1e6, 1, 0.001, &hp->trust_coef));
    if (k == TK_OPT_LARS && !(hp->trust_coef > 0)) return bad(c, "trust_coef", "expected a number in (0, 1e6)");
    return 0;
}

// warmup_hold_exp (MLPerf RNN-T): whole epochs of warm-up and hold as the reference's integer
// arguments, the decay factor per epoch, the floor (the reference's default min_lr 1e-5).
static int parse_exp(const ctx *c, int64_t spe, tk_opt_config *cfg) {
    tk_lr_sched *s = &cfg->lr;
    int64_t w, h;
    if (spe <= 0) return bad(c, "lr_schedule", "warmup_hold_exp needs the steps per epoch, which this workload does not give");
    TRY(integer(c, "warmup_epochs", 0, 1000000, 0, &w));
    TRY(integer(c, "hold_epochs", 0, 1000000, 0, &h));
    if ((double)(w + h) * (double)spe > (double)MAX_STEPS)
        return bad(c, "hold_epochs", "%lld epochs of %lld steps is too many steps", (long long)(w + h), (long long)spe);
    TRY(num(c, "gamma", 0, 1, 0, NAN, &s->gamma));
    if (!(s->gamma > 0)) return bad(c, "gamma", "expected a number in (0, 1]");
    TRY(num(c, "min_lr", 0, 1e6, 0, 1e-5, &s->min_lr));
    s->epoch_steps = spe;
    s->warmup_steps = w * spe;
    s->hold_steps = h * spe;
    cfg->warmup_epochs = (double)w;
    return 0;
}

static int parse_sched(const ctx *c, int si, int64_t spe, tk_opt_config *cfg) {
    tk_lr_sched *s = &cfg->lr;
    memset(s, 0, sizeof *s);
    s->kind = sched_kinds[si];
    TRY(num(c, "base_lr", 0, 1e6, 0, NAN, &s->base_lr));
    cfg->total_epochs = -1;
    if (s->kind == TK_LR_WARMUP_HOLD_EXP) return parse_exp(c, spe, cfg);
    int epochs_ok = s->kind == TK_LR_LARS_POLY || s->kind == TK_LR_COSINE || s->kind == TK_LR_STEP;
    TRY(steps_or_epochs(c, "warmup_steps", epochs_ok ? "warmup_epochs" : NULL, spe, 0, &s->warmup_steps,
                        &cfg->warmup_epochs));
    if (s->kind == TK_LR_POLY || s->kind == TK_LR_STEP || s->kind == TK_LR_COSINE) {
        // the warm-up from a rate, one rate per epoch (MLPerf 3D U-Net's reference)
        int per_epoch;
        TRY(num(c, "warmup_init_lr", 0, 1e6, 0, 0, &s->warmup_init_lr));
        TRY(boolean(c, "warmup_per_epoch", 0, &per_epoch));
        if (per_epoch && spe <= 0)
            return bad(c, "warmup_per_epoch", "needs the steps per epoch, which this workload does not give");
        s->warmup_period = per_epoch ? spe : 0;
    }
    switch (s->kind) {
    case TK_LR_POLY:
        TRY(integer(c, "decay_start_step", 0, MAX_STEPS, 0, &s->decay_start));
        TRY(integer(c, "decay_steps", 0, MAX_STEPS, 0, &s->decay_steps));
        TRY(num(c, "poly_power", 0, 100, 0, 2, &s->power));
        TRY(num(c, "min_lr", 0, 1e6, 0, 0, &s->min_lr));
        break;
    case TK_LR_WARMUP_POLY:
        TRY(integer(c, "start_warmup_step", -MAX_STEPS, 0, 0, &s->start_warmup));
        TRY(integer(c, "total_steps", 1, MAX_STEPS, INT64_MIN, &s->total_steps));
        TRY(num(c, "poly_power", 0, 100, 0, 1, &s->power));
        TRY(num(c, "end_lr", 0, 1e6, 0, 0, &s->end_lr));
        break;
    case TK_LR_LARS_POLY:
    case TK_LR_COSINE:
        TRY(steps_or_epochs(c, "total_steps", "total_epochs", spe, 1, &s->total_steps, &cfg->total_epochs));
        if (s->total_steps <= s->warmup_steps)
            return bad(c, cfg->total_epochs >= 0 ? "total_epochs" : "total_steps",
                       "must be more than the warm-up's %lld steps", (long long)s->warmup_steps);
        TRY(num(c, "poly_power", 0, 100, 0, 2, &s->power)); // absent from cosine's keys: the default
        TRY(num(c, "end_lr", 0, 1e6, 0, s->kind == TK_LR_LARS_POLY ? 1e-4 : 0, &s->end_lr));
        break;
    case TK_LR_STEP:
        TRY(milestones(c, spe, s));
        TRY(num(c, "gamma", 0, 1, 0, 0.1, &s->gamma));
        if (!(s->gamma > 0)) return bad(c, "gamma", "expected a number in (0, 1]");
        break;
    case TK_LR_WARMUP_HOLD_EXP: break; // parse_exp (above)
    }
    return 0;
}

int tk_opt_config_parse(const json_t *obj, const char *file, const char *jpath, int64_t steps_per_epoch,
                        tk_opt_config *cfg, tk_err *e) {
    memset(cfg, 0, sizeof *cfg);
    ctx c = {obj, file, jpath, e};
    if (!json_is_object(obj)) return bad(&c, NULL, "expected an object (the optimizer and its schedule)");
    int oi, si;
    TRY(pick(&c, "name", opt_names, NOPT, NULL, &oi));
    TRY(pick(&c, "lr_schedule", sched_names, NSCHED, "poly", &si));
    TRY(check_keys(&c, oi, si, &cfg->given_int));
    cfg->name = opt_names[oi];
    cfg->schedule = sched_names[si];
    TRY(parse_hp(&c, oi, &cfg->hp));
    TRY(parse_sched(&c, si, steps_per_epoch, cfg));
    // the weights' moving average for evaluation (kernels/ema.h; 0: none)
    TRY(num(&c, "ema", 0, 1, 1, 0, &cfg->ema));
    // ZeRO-1 over the ranks (engine/optimizer.h): LARS's per-tensor norms are needed before its
    // update, which the distributed form does not gather (kernels/optim.h)
    TRY(boolean(&c, "distributed", 0, &cfg->distributed));
    if (cfg->distributed && cfg->hp.kind == TK_OPT_LARS)
        return bad(&c, "distributed", "the distributed optimizer does not run lars: set it false");
    // What the config parser accepts the ops must take (a failure here is a bug in this file).
    if (tk_optim_check(&cfg->hp, 0, NULL, 0, TK_BF16, e)) return TK_EINTERNAL;
    return 0;
}
