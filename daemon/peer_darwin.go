package daemon

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid of the process at the other end of c
// (LOCAL_PEERCRED); the pid is not reported (0).
func peerCred(c net.Conn) (uid, pid int, err error) {
	rc, err := rawConn(c)
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return int(cred.Uid), 0, nil
}
