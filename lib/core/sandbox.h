// A child process for code that cannot be trusted with hostile input (a third-party parser that
// may crash, loop or allocate without bound on a crafted file). The child is forked (not
// exec'd), so it runs any function of this program; it gets limits on its CPU time and on the
// memory it may add to what it inherits, its stdin/stdout/stderr on /dev/null, no other file
// descriptors but one socket to its parent, and the default action for every signal, so a fault
// kills it instead of running the parent's handlers. The parent talks to it in requests and
// answers over the socket and waits for each answer at most a wall-clock bound; a child that
// dies, runs out of time or stops answering becomes an error the caller words (TK_EDATA, what =
// "crashed (signal 11, Segmentation fault)", "ran out of CPU time (10 s)", "ran out of memory
// (512 MiB)", "gave no answer within 30 s", "exited with status 1", ...). What the child
// sends is bytes: the parent must check every length, count and value it receives.
#ifndef TK_SANDBOX_H
#define TK_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double cpu_s;        // CPU seconds for the child's whole life (ITIMER_PROF, RLIMIT_CPU); 0 = none
    uint64_t mem_bytes;  // address space the child may map beyond what it inherits, and resident
                         // memory beyond the parent's at the start (watched); 0 = no limit
    double wall_s;       // the longest the parent waits for one answer; 0 = forever
} tk_sandbox_limits;

typedef struct tk_sandbox tk_sandbox;

// The child's work: called in the child with the socket to the parent; its return value is the
// child's exit status (the child then ends with _exit: no atexit handlers, no stdio flush).
typedef int (*tk_sandbox_fn)(void *arg, int fd);

// Forks a child running fn(arg, fd). TK_EIO when the system refuses (fork, socketpair).
int tk_sandbox_start(tk_sandbox **sb, const tk_sandbox_limits *lim, tk_sandbox_fn fn, void *arg, tk_err *e);
// Parent side: sends n bytes to the child. A child that is gone gives the error of its end.
int tk_sandbox_send(tk_sandbox *sb, const void *p, size_t n, tk_err *e);
// Parent side: receives exactly n bytes within the wall-clock bound. A child that closed its end
// gives the error of its end (crashed, out of CPU time, exited with status N, ended early); one
// that does not answer in time is killed: "gave no answer within W s".
int tk_sandbox_recv(tk_sandbox *sb, void *p, size_t n, tk_err *e);
// Kills the child (if it still runs), reaps it and frees sb. NULL is fine.
void tk_sandbox_stop(tk_sandbox *sb);

// Child side: sends or receives exactly n bytes; -1 when the parent is gone.
int tk_sandbox_put(int fd, const void *p, size_t n);
int tk_sandbox_get(int fd, void *p, size_t n);

// The limits for a parser of a file of `size` bytes (in whole MiB): CPU = cpu_floor_s +
// cpu_s_per_mib per MiB, memory = mem_floor_mib MiB + mem_per_byte times the size; then the
// environment's overrides, env_cpu (seconds) and env_mem (MiB), when set (TK_EUSAGE naming the
// variable when one is not a positive number); wall = 3 x CPU + 10 s.
int tk_sandbox_limits_for(tk_sandbox_limits *lim, uint64_t size, double cpu_floor_s, double cpu_s_per_mib,
                          uint64_t mem_floor_mib, double mem_per_byte, const char *env_cpu, const char *env_mem,
                          tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
