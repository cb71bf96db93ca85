package gitflow

import "context"

// Locker takes a lock shared by every worker (etcd); nil = this process only.
//
// MergeWith takes it, with Remote set, with the name of the branch merged
// into (loopr/<slug>-<short-id> of a plan), after this process's own lock
// of that branch: an etcd mutex is held per session, so two merges of one
// process must not meet in it. The etcd Locker keys the name under
// <prefix>/locks/git/.
type Locker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// adminLock is the name of the shared lock on a repository's worktree
// administration (not a valid branch name, so never a merge's lock).
const adminLock = ".worktrees"

// lockAdmin takes r.admin and, for workers sharing this repository from
// several homes (Lock set, no Remote), the shared lock adminLock too:
// git worktree add, remove and prune in one repository must not
// interleave across processes either (a prune drops the registration
// another process is adding). It returns the unlock.
func (r *Repo) lockAdmin(ctx context.Context) (unlock func()) {
	r.admin.Lock()
	if r.Lock == nil || r.Remote != "" {
		return r.admin.Unlock
	}
	shared, err := r.Lock.Lock(ctx, adminLock)
	if err != nil {
		r.logger().Warn("worktree lock shared by the workers not taken", "err", err)
		return r.admin.Unlock
	}
	return func() { shared(); r.admin.Unlock() }
}
