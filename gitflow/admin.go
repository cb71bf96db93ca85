package gitflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// adminLockFile is the file, in the repository's common git directory, whose
// lock every loopr process holds while it administers worktrees or fetches.
const adminLockFile = "loopr-worktrees.lock"

// lockAdmin takes the lock of worktree administration (add, remove, prune)
// and of fetches: r.admin within this process, and a file lock in the
// repository's common git directory across processes — workers sharing
// one repository from several homes. `git worktree add` and `git fetch`
// read the admin directory of every worktree, and fail on one that another
// git is creating ("failed to read .git/worktrees/<name>/commondir").
// With Lock set and no Remote (workers sharing one repository from
// several homes), the shared lock adminLock too. Waiting for another
// process gives up when ctx ends, or after the git timeout when ctx has no
// deadline.
func (r *Repo) lockAdmin(ctx context.Context) (unlock func(), err error) {
	r.admin.Lock()
	f, err := r.adminFile(ctx)
	if err != nil {
		r.admin.Unlock()
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(r.timeout())
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			r.admin.Unlock()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			f.Close()
			r.admin.Unlock()
			return nil, fmt.Errorf("wait for another loopr's worktree work (%s): %w", f.Name(), context.DeadlineExceeded)
		}
		time.Sleep(5 * time.Millisecond)
	}
	release := func() {
		f.Close() // lets go of the file lock
		r.admin.Unlock()
	}
	if r.Lock == nil || r.Remote != "" {
		return release, nil
	}
	// Workers sharing this repository from several homes also take the
	// lock they share (etcd), in case the file lock does not hold across
	// their machines (a network file system).
	shared, err := r.Lock.Lock(ctx, adminLock)
	if err != nil {
		r.logger().Warn("worktree lock shared by the workers not taken", "err", err)
		return release, nil
	}
	return func() { shared(); release() }, nil
}

// adminFile opens the lock file of lockAdmin.
func (r *Repo) adminFile(ctx context.Context) (*os.File, error) {
	r.commonOnce.Do(func() {
		out, err := r.git(ctx, r.Root, "rev-parse", "--path-format=absolute", "--git-common-dir")
		r.common, r.commonErr = filepath.FromSlash(strings.TrimSpace(out)), err
	})
	if r.commonErr != nil {
		return nil, fmt.Errorf("find the repository's git directory: %w", r.commonErr)
	}
	path := filepath.Join(r.common, adminLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
