package gitflow

import "context"

// Locker takes a lock shared by every worker (etcd); nil = this process only.
type Locker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}
