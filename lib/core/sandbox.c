// A limited child process for untrusted parsers (sandbox.h).
#include "core/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/progress.h"

// Under AddressSanitizer (the fuzz targets, SAN=address builds) a fault the sanitizer sees in the
// child ends in its death callback, which a fuzzer sets to save the input as its own crash: in
// the child the callback must only end the child, so the parent sees a crash and goes on.
#if defined(__SANITIZE_ADDRESS__)
#define TK_SANDBOX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TK_SANDBOX_ASAN 1
#endif
#endif
#ifdef TK_SANDBOX_ASAN
void __sanitizer_set_death_callback(void (*callback)(void));
static void die_by_abort(void) {
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
    _exit(134);
}
#endif

struct tk_sandbox {
    pid_t pid;
    int fd;
    tk_sandbox_limits lim;
    uint64_t rss_limit; // bytes; 0 = none
    int reaped, status, timed_out, out_of_memory;
    double cpu_used;
};

// The resident bytes of process pid (0: this one) from /proc, or 0 when unknown.
static uint64_t rss_of(pid_t pid) {
    char name[64];
    snprintf(name, sizeof name, pid ? "/proc/%ld/statm" : "/proc/self/statm", (long)pid);
    unsigned long long vm, rss = 0;
    FILE *f = fopen(name, "r");
    if (f && fscanf(f, "%llu %llu", &vm, &rss) != 2) rss = 0;
    if (f) fclose(f);
    return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

// The child's setup; any failure ends it with status 127 (the parent reports "exited with 127").
static void child_setup(int *fd, const tk_sandbox_limits *lim, pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
#ifdef TK_SANDBOX_ASAN
    __sanitizer_set_death_callback(die_by_abort);
#endif
    // Nothing of the parent's but the socket: not its output file, not its terminal.
    int hi = fcntl(*fd, F_DUPFD, 10), null = open("/dev/null", O_RDWR);
    if (hi < 0 || null < 0) _exit(127);
    for (int k = 0; k < 3; k++)
        if (dup2(null, k) < 0) _exit(127);
    if (dup2(hi, 3) < 0 || close_range(4, ~0u, 0) != 0) _exit(127);
    *fd = 3;
    struct rlimit r = {0, 0};
    setrlimit(RLIMIT_CORE, &r); // a crash leaves no core file in the user's directory
    if (lim->cpu_s > 0) {
        // SIGPROF at the limit (to the microsecond: a fuzzer wants a fraction of a second);
        // RLIMIT_CPU, whole seconds, backs it: SIGXCPU a second later, SIGKILL one more on.
        double whole = floor(lim->cpu_s);
        struct itimerval it = {{0, 0}, {(time_t)whole, (suseconds_t)((lim->cpu_s - whole) * 1e6)}};
        r.rlim_cur = (rlim_t)ceil(lim->cpu_s) + 1;
        r.rlim_max = r.rlim_cur + 1;
        if (setitimer(ITIMER_PROF, &it, NULL) != 0 || setrlimit(RLIMIT_CPU, &r) != 0) _exit(127);
    }
    if (lim->mem_bytes) {
        // The address space it inherits (the parent's heap, threads' stacks; a sanitizer's shadow)
        // plus the budget. Without /proc, the data segment alone is bounded.
        unsigned long long vm = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        int have = f && fscanf(f, "%llu", &vm) == 1;
        if (f) fclose(f);
        r.rlim_cur = r.rlim_max = have ? (rlim_t)(vm * (unsigned long long)sysconf(_SC_PAGESIZE) + lim->mem_bytes)
                                       : (rlim_t)lim->mem_bytes;
        if (setrlimit(have ? RLIMIT_AS : RLIMIT_DATA, &r) != 0) _exit(127);
    }
    prctl(PR_SET_DUMPABLE, 0); // nor a core through a core_pattern pipe
}

int tk_sandbox_start(tk_sandbox **sbp, const tk_sandbox_limits *lim, tk_sandbox_fn fn, void *arg, tk_err *e) {
    *sbp = NULL;
    tk_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) return tk_err_errno(e, ENOMEM, "out of memory");
    sb->lim = *lim;
    // The child starts with the parent's resident pages; the memory limit comes on top.
    if (lim->mem_bytes) sb->rss_limit = rss_of(0) + lim->mem_bytes;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        free(sb);
        return tk_err_errno(e, errno, "cannot create a socket pair for a child process");
    }
    pid_t parent = getpid();
    sb->pid = fork();
    if (sb->pid < 0) {
        int err = errno;
        close(sv[0]);
        close(sv[1]);
        free(sb);
        return tk_err_errno(e, err, "cannot start a child process");
    }
    if (sb->pid == 0) {
        close(sv[0]);
        int fd = sv[1];
        child_setup(&fd, lim, parent);
        _exit(fn(arg, fd) & 255);
    }
    close(sv[1]);
    sb->fd = sv[0];
    *sbp = sb;
    return 0;
}

// Waits for the child's end until deadline (then kills it), and keeps its status and CPU time.
static void reap(tk_sandbox *sb, double deadline) {
    if (sb->reaped) return;
    struct rusage ru;
    for (;;) {
        pid_t r = wait4(sb->pid, &sb->status, WNOHANG, &ru);
        if (r == sb->pid) break;
        if (r < 0 && errno != EINTR) { // not our child any more: nothing to report
            sb->status = 0;
            memset(&ru, 0, sizeof ru);
            break;
        }
        if (tk_now() >= deadline) {
            kill(sb->pid, SIGKILL);
            deadline = INFINITY;
            continue;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    sb->reaped = 1;
    sb->cpu_used = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                   ru.ru_stime.tv_usec * 1e-6;
}

// The error of a child that closed its end: how it ended.
static int child_ended(tk_sandbox *sb, double deadline, tk_err *e) {
    reap(sb, deadline);
    int st = sb->status;
    if (sb->timed_out) return tk_err_set(e, TK_EDATA, "gave no answer within %g s", sb->lim.wall_s);
    if (sb->out_of_memory)
        return tk_err_set(e, TK_EDATA, "ran out of memory (%llu MiB)", (unsigned long long)(sb->lim.mem_bytes >> 20));
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        int killed_at_cpu = sig == SIGKILL && sb->lim.cpu_s > 0 && sb->cpu_used >= sb->lim.cpu_s;
        if (sig == SIGPROF || sig == SIGXCPU || killed_at_cpu)
            return tk_err_set(e, TK_EDATA, "ran out of CPU time (%g s)", sb->lim.cpu_s);
        return tk_err_set(e, TK_EDATA, "crashed (signal %d, %s)", sig, strsignal(sig));
    }
    if (WIFEXITED(st) && WEXITSTATUS(st))
        return tk_err_set(e, TK_EDATA, "exited with status %d", WEXITSTATUS(st));
    return tk_err_set(e, TK_EDATA, "ended before it answered");
}

static double deadline_of(const tk_sandbox *sb) { return sb->lim.wall_s > 0 ? tk_now() + sb->lim.wall_s : INFINITY; }

int tk_sandbox_send(tk_sandbox *sb, const void *p, size_t n, tk_err *e) {
    const char *c = p;
    double deadline = deadline_of(sb);
    while (n) {
        ssize_t w = send(sb->fd, c, n, MSG_NOSIGNAL); // a gone child is an error, not SIGPIPE
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) return child_ended(sb, deadline, e);
        if (w < 0) return tk_err_errno(e, errno, "cannot write to a child process");
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int tk_sandbox_recv(tk_sandbox *sb, void *p, size_t n, tk_err *e) {
    char *c = p;
    double deadline = deadline_of(sb);
    while (n) {
        double left = deadline - tk_now();
        if (left <= 0) {
            kill(sb->pid, SIGKILL);
            sb->timed_out = 1;
            return child_ended(sb, INFINITY, e);
        }
        // The address-space limit does not hold under a sanitizer, whose allocator maps its heap
        // inside a range reserved at start: the child's resident size is watched as well.
        if (sb->rss_limit && left > 0.1) left = 0.1;
        struct pollfd pf = {sb->fd, POLLIN, 0};
        int r = poll(&pf, 1, isinf(left) ? -1 : (int)ceil(left * 1000));
        if (r < 0 && errno != EINTR) return tk_err_errno(e, errno, "cannot wait for a child process");
        if (r == 0 && sb->rss_limit && rss_of(sb->pid) > sb->rss_limit) {
            kill(sb->pid, SIGKILL);
            sb->out_of_memory = 1;
            return child_ended(sb, INFINITY, e);
        }
        if (r <= 0) continue;
        ssize_t got = recv(sb->fd, c, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno != ECONNRESET) return tk_err_errno(e, errno, "cannot read from a child process");
        if (got <= 0) return child_ended(sb, deadline, e);
        c += got;
        n -= (size_t)got;
    }
    return 0;
}

void tk_sandbox_stop(tk_sandbox *sb) {
    if (!sb) return;
    close(sb->fd);
    if (!sb->reaped) kill(sb->pid, SIGKILL); // it holds nothing that needs an orderly end
    reap(sb, INFINITY);
    free(sb);
}

int tk_sandbox_put(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int tk_sandbox_get(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t got = recv(fd, c, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        c += got;
        n -= (size_t)got;
    }
    return 0;
}

static int env_number(const char *name, double *v, tk_err *e) {
    const char *s = name ? getenv(name) : NULL;
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end || !(x > 0) || !isfinite(x) || x > 1e12)
        return tk_err_set(e, TK_EUSAGE, "%s=%s: expected a positive number", name, s);
    *v = x;
    return 0;
}

int tk_sandbox_limits_for(tk_sandbox_limits *lim, uint64_t size, double cpu_floor_s, double cpu_s_per_mib,
                          uint64_t mem_floor_mib, double mem_per_byte, const char *env_cpu, const char *env_mem,
                          tk_err *e) {
    double mib = (double)(size >> 20), cpu = cpu_floor_s + cpu_s_per_mib * mib,
           mem = (double)mem_floor_mib + mem_per_byte * mib; // whole MiB: round limits for small files
    TRY(env_number(env_cpu, &cpu, e));
    TRY(env_number(env_mem, &mem, e));
    lim->cpu_s = cpu;
    lim->mem_bytes = (uint64_t)(mem * (1 << 20));
    lim->wall_s = 3 * cpu + 10; // a bound for a reader that blocks; a loaded machine slows one that works
    return 0;
}
