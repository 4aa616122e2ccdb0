#include "core/afile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <libgen.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_int tmp_counter;

int tk_afile_open(tk_afile *f, const char *path, tk_err *e) {
    memset(f, 0, sizeof *f);
    if (strlen(path) + 40 >= sizeof f->tmp)
        return tk_err_set(e, TK_EUSAGE, "%s: path too long", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    // A writer of this path killed mid-write (kill -9, a crash) left its temporary: ours to remove.
    // Best effort: one that cannot be removed does not stop this write.
    tk_err ignored;
    tk_afile_remove_stale_of(path, NULL, &ignored);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld.%d", path, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    int fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        f->tmp[0] = 0;
        return tk_err_errno(e, err, "%s: cannot create", path);
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        int err = errno;
        close(fd);
        unlink(f->tmp);
        f->tmp[0] = 0;
        return tk_err_errno(e, err, "%s: cannot open", path);
    }
    return 0;
}

int tk_fsync_dir_of(const char *path, tk_err *e) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return tk_err_errno(e, errno, "%s: cannot open its directory", path);
    // Some file systems (tmpfs on old kernels) refuse fsync on directories: that is not data loss.
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        int err = errno;
        close(fd);
        return tk_err_errno(e, err, "%s: cannot fsync its directory", path);
    }
    close(fd);
    return 0;
}

int tk_afile_commit(tk_afile *f, tk_err *e) {
    if (!f->fp || !f->tmp[0]) return tk_err_set(e, TK_EINTERNAL, "%s: commit without open", f->path);
    int err = 0;
    if (fflush(f->fp) != 0) err = errno;
    if (!err && ferror(f->fp)) err = EIO;
    if (!err && fsync(fileno(f->fp)) != 0) err = errno;
    if (fclose(f->fp) != 0 && !err) err = errno;
    f->fp = NULL;
    if (!err && rename(f->tmp, f->path) != 0) err = errno;
    if (err) {
        unlink(f->tmp);
        f->tmp[0] = 0;
        return tk_err_errno(e, err, "%s: cannot write", f->path);
    }
    f->tmp[0] = 0;
    return tk_fsync_dir_of(f->path, e);
}

void tk_afile_abort(tk_afile *f) {
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
    if (f->tmp[0]) unlink(f->tmp);
    f->tmp[0] = 0;
}

// The PID of a temporary's name "NAME.tmp.PID.N" (t points at ".tmp."), or 0 when the rest of
// the name is not "PID.N".
static long tmp_pid(const char *t) {
    char *end;
    long pid = strtol(t + 5, &end, 10);
    if (pid <= 0 || *end != '.' || !end[1]) return 0;
    strtol(end + 1, &end, 10);
    return *end ? 0 : pid;
}

// Removes from dir the temporaries "NAME.tmp.PID.N" of processes that no longer exist, where NAME
// is base (exactly) when base is given, else any name ending in suffix.
static int remove_stale(const char *dir, const char *base, const char *suffix, int *removed, tk_err *e) {
    if (removed) *removed = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : tk_err_errno(e, errno, "%s: cannot open the directory", dir);
    struct dirent *de;
    size_t bl = base ? strlen(base) : 0, sl = suffix ? strlen(suffix) : 0;
    int rc = 0;
    while ((de = readdir(d))) {
        const char *nm = de->d_name, *t;
        if (base) {
            if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0) continue;
            t = nm + bl;
        } else {
            t = strstr(nm, ".tmp.");
            if (!t || (size_t)(t - nm) < sl || strncmp(t - sl, suffix, sl) != 0) continue;
        }
        long pid = tmp_pid(t);
        if (!pid || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; // alive, or not ours to judge
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if (unlink(p) != 0 && errno != ENOENT) {
            rc = tk_err_errno(e, errno, "%s: cannot remove a stale temporary file", p);
            break;
        }
        if (removed) (*removed)++;
    }
    closedir(d);
    return rc;
}

int tk_afile_remove_stale(const char *dir, const char *suffix, int *removed, tk_err *e) {
    return remove_stale(dir, NULL, suffix, removed, e);
}

int tk_afile_remove_stale_of(const char *path, int *removed, tk_err *e) {
    char dir[4096], base[4096];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(base, sizeof base, "%s", path);
    return remove_stale(dirname(dir), basename(base), NULL, removed, e);
}

int tk_write_all(FILE *fp, const void *buf, size_t n, const char *name, tk_err *e) {
    if (n && fwrite(buf, 1, n, fp) != n)
        return tk_err_errno(e, errno ? errno : EIO, "%s: write failed", name);
    return 0;
}

int tk_pread_all(int fd, void *buf, size_t n, long long off, const char *name, tk_err *e) {
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            tk_err_errno(e, err, "read failed");
            return tk_err_where(e, "%s: offset %lld", name, off);
        }
        if (r == 0) {
            tk_err_set(e, TK_EDATA, "unexpected end of file (%zu bytes missing)", n);
            return tk_err_where(e, "%s: offset %lld", name, off);
        }
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}
