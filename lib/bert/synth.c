#include <stdlib.h>
#include <string.h>
#include "bert/synth.h"
void bert_synth_defaults(bert_synth_opts *o, int preset) { memset(o, 0, sizeof *o); (void)preset; }
void bert_synth_apply(bert_synth_opts *o, const bert_synth_opts *u) { (void)o; (void)u; }
int bert_synth_write(const bert_synth_opts *o, const char *dir, char **summary, tk_err *e) { (void)o; (void)dir; *summary = NULL; return tk_err_set(e, TK_EINTERNAL, "todo"); }
