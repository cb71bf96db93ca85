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
// administration (not a valid branch name, so never a merge's lock):
// lockAdmin takes it for workers sharing one repository from several homes.
const adminLock = ".worktrees"
