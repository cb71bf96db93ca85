package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestProcesses: three real etcd processes form a cluster; with one
// killed (SIGKILL) the other two take writes; restarted on its data, the
// killed member catches up and serves every write from its own copy.
func TestProcesses(t *testing.T) {
	t.Parallel()
	p := StartProcesses(t, 3, ProcOptions{NoFsync: true})
	cli, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints(), DialTimeout: testslack.Scale(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testslack.Scale(30*time.Second))
	defer cancel()
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			// A put during an election may time out ("request timed out,
			// possibly due to previous leader failure"): a client tries
			// again (the put is idempotent), as loopr's store does.
			for try := 1; ; try++ {
				_, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), "v")
				if err == nil {
					break
				}
				if try == 20 || ctx.Err() != nil {
					t.Fatalf("put %d: %v (%d tries)", i, err, try)
				}
				t.Logf("put %d: %v; trying again", i, err)
				time.Sleep(250 * time.Millisecond)
			}
		}
	}
	put(0, 10)
	leader := p.Leader()
	if leader < 0 || leader >= 3 {
		t.Fatalf("Leader() = %d", leader)
	}
	p.Kill(leader)
	if next := p.Leader(); next == leader {
		t.Fatalf("Leader() = %d, the member killed", next)
	}
	p.Restart(leader)
	p.Kill(0)
	if p.Alive(0) {
		t.Fatal("member 0 alive after Kill")
	}
	put(10, 20) // two of three: a quorum
	p.Restart(0)
	if !p.Alive(0) {
		t.Fatal("member 0 not alive after Restart")
	}
	// Read from member 0 alone, without a round of consensus: its own copy.
	one, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints()[:1], DialTimeout: testslack.Scale(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var got int64
	for deadline := time.Now().Add(testslack.Scale(10 * time.Second)); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := one.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		if err == nil {
			if got = resp.Count; got == 20 {
				return
			}
		}
	}
	t.Errorf("restarted member 0 holds %d keys, want 20", got)
}
