package control

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/store"
)

// Artifacts across machines. The runner keeps the artifact a plan, spec
// or phase iteration passed with under the home of the daemon that ran it
// (<home>/loops/<id>/accepted/), and the loop records that path. On an
// etcd store the daemons may be on different machines, so the transaction
// that records the pass also puts the artifact's bytes into the store,
// under artifacts/<hex sha256 of the path>. Every reader — a child's
// prompt, approve, show --artifact, the scheduler's artifact_missing
// check — takes the local file when it exists, else the store's copy.
// Retention deletes the copy with its loop; a loop keeps at most one copy
// (its current Artifact): a new pass or an iterate drops the old one.

// artifactPrefix is where the copies are, among the store's raw keys.
const artifactPrefix = "artifacts/"

// askByKey is how many unseen artifacts a decision looks up key by key;
// more are looked up with one keys-only request over every copy.
const askByKey = 256

// ArtifactKey is the raw store key of the copy of the artifact at path.
func ArtifactKey(path string) string {
	sum := sha256.Sum256([]byte(path))
	return artifactPrefix + hex.EncodeToString(sum[:])
}

// PutArtifact keeps data, the accepted artifact at path, in the store in
// tx, in place of old (the loop's previous artifact, or ""). On the bbolt
// file it does nothing: every reader is on the file's machine.
func PutArtifact(tx *store.Tx, st *store.Store, path, old string, data []byte) error {
	if st.Backend() != store.BackendEtcd {
		return nil
	}
	if len(data) > artifact.MaxSize {
		return fmt.Errorf("artifact %s: %d bytes, more than %d", path, len(data), artifact.MaxSize)
	}
	if err := DropArtifact(tx, st, old, path); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	return tx.PutRaw(ArtifactKey(path), data, 0)
}

// DropArtifact deletes the store's copy of the artifact at path in tx,
// unless path is "" or keep. Nothing on the bbolt file.
func DropArtifact(tx *store.Tx, st *store.Store, path, keep string) error {
	if path == "" || path == keep || st.Backend() != store.BackendEtcd {
		return nil
	}
	return tx.DeleteRaw(ArtifactKey(path))
}

// ReadArtifact reads the accepted artifact at path: the local file (a
// regular file of at most artifact.MaxSize bytes, reached without a
// symlink below home) when it exists, else, on an etcd store, the store's
// copy. If neither exists the error is the local file's.
func ReadArtifact(st *store.Store, home, path string) ([]byte, error) {
	data, err := safefile.ReadIn(home, path, artifact.MaxSize)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || st == nil || st.Backend() != store.BackendEtcd {
		return data, err
	}
	var v []byte
	var ok bool
	verr := st.View(func(tx *store.Tx) error {
		v, _, ok = tx.Raw(ArtifactKey(path))
		return nil
	})
	switch {
	case verr != nil:
		return nil, fmt.Errorf("%w; and the store's copy: %v", err, verr)
	case !ok:
		return nil, fmt.Errorf("%w (and the store keeps no copy)", err)
	case len(v) > artifact.MaxSize:
		return nil, &safefile.TooLargeError{Path: path + " (store copy)", Size: int64(len(v)), Limit: artifact.MaxSize}
	}
	return v, nil
}

// ReadArtifact is the package's ReadArtifact on the service's store and home.
func (s *Service) ReadArtifact(path string) ([]byte, error) {
	return ReadArtifact(s.Store, s.Paths.Home, path)
}

// storeArtifacts remembers which artifact copies the store was seen to
// hold. A copy never changes once put (its key is its path, and a path is
// one iteration's), and goes only with its loop, so a key seen once is not
// asked for again: the scheduler's check costs one keys-only request per
// decision only while some artifact is missing here and not yet seen in
// the store: count-only reads of those keys when they are few, one
// keys-only read of every copy when they are many.
type storeArtifacts struct {
	mu   sync.Mutex
	seen map[string]bool // ArtifactKey → present
}

// artifactExists reports whether the artifact at path exists here or, on
// an etcd store, in the store.
func (s *Service) artifactExists(path string) bool {
	return s.artifactsExist([]string{path})[0]
}

// artifactsExist checks many artifact paths with a few stats in flight at
// once: 10k of them (the parents of 100k waiting loops) are a good part of
// a debug plan's time one by one. On an etcd store, the paths missing here
// are looked up among the store's copies (storeArtifacts).
func (s *Service) artifactsExist(paths []string) []bool {
	ok := make([]bool, len(paths))
	workers := min(4, max(1, len(paths)/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(paths); i += workers {
				_, err := os.Stat(paths[i])
				ok[i] = err == nil
			}
		})
	}
	wg.Wait()
	if s.Store == nil || s.Store.Backend() != store.BackendEtcd {
		return ok
	}
	sa := &s.arts
	sa.mu.Lock()
	defer sa.mu.Unlock()
	var ask []int
	for i, p := range paths {
		if !ok[i] {
			if ok[i] = sa.seen[ArtifactKey(p)]; !ok[i] {
				ask = append(ask, i)
			}
		}
	}
	if len(ask) == 0 {
		return ok
	}
	if sa.seen == nil {
		sa.seen = map[string]bool{}
	}
	if len(ask) <= askByKey {
		// A few (the children of a parent that just passed elsewhere):
		// those keys only, not every copy in the store.
		keys := make([]string, len(ask))
		for j, i := range ask {
			keys[j] = ArtifactKey(paths[i])
		}
		there, err := s.Store.RawExist(keys)
		if err != nil {
			return ok // etcd unreachable: missing for this decision; the next one asks again
		}
		for j, i := range ask {
			if there[j] {
				sa.seen[keys[j]], ok[i] = true, true
			}
		}
		return ok
	}
	keys, err := s.Store.RawKeys(artifactPrefix)
	if err != nil {
		return ok
	}
	for _, k := range keys {
		if strings.HasPrefix(k, artifactPrefix) {
			sa.seen[k] = true
		}
	}
	for _, i := range ask {
		ok[i] = sa.seen[ArtifactKey(paths[i])]
	}
	return ok
}

// forgetArtifacts drops deleted copies from the cache.
func (s *Service) forgetArtifacts(paths []string) {
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	for _, p := range paths {
		delete(s.arts.seen, ArtifactKey(p))
	}
}
