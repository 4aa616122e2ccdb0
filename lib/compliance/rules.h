// Rule files in memory (internal to lib/compliance; the format is man 5 trainkit-compliance).
#ifndef TK_COMPLIANCE_RULES_H
#define TK_COMPLIANCE_RULES_H

#include "compliance/compliance.h"
#include "compliance/expr.h"

enum { REQ_NONE, REQ_EXACTLY_ONE, REQ_AT_LEAST_ONE, REQ_AT_LEAST, REQ_AT_LEAST_ONE_OR };

typedef struct lc_keyrule {
    char *name;
    unsigned hash;
    int req, at_least;
    const char **alts; // at_least_one_or alternatives
    int nalts;
    const char **chk_src, **post_src, **first_src;
    lc_expr **chk, **post, **first; // first: checks of the key's first record only
    int nchk, npost, nfirst;
    char *alo_src; // at_least_one_check
    lc_expr *alo;
    char *include;     // rule file to run next, "{value}" replaced by str(v['value'])
    char *strict_only; // tag: findings are errors only in strict mode
} lc_keyrule;

typedef struct lc_endrule {
    char *name, *src, *strict_only;
    lc_expr *chk;
    lc_expr *diff[2]; // optional: (got, want) lists whose difference explains a failure
} lc_endrule;

// Records derived from others before the rules run (MLCommons' stable diffusion rules join the
// FID and CLIP results of one evaluation into one record): see "derive" in man 5.
typedef struct lc_derive {
    char *name, *from, *group_name;
    char *src[3];          // when, group, field (for messages)
    lc_expr *when, *group, *field;
} lc_derive;

typedef struct lc_conf {
    char *name; // "training-1.1.0/closed_dlrm"
    int missing;
    pv *state, *cst;
    lc_derive *derive;
    int nderive;
    lc_keyrule *keys;
    int nkeys;
    lc_endrule *ends;
    int nends;
} lc_conf;

struct lc_rules {
    char dir[4096];
    char root[128]; // "training-1.1.0/common"
    char set[96];   // "training-1.1.0": where includes without a '/' are looked up
    lc_arena *a;
    lc_conf *confs[256];
    int nconfs;
};

// The rule file `name` (cached). A file that does not exist comes back with missing = 1.
int lc_rules_conf(lc_rules *r, const char *name, lc_conf **out, tk_err *e);

#endif
