package control

import (
	"os"
	"path/filepath"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// OpenStore opens the store cfg's store section names: the bbolt file
// paths.DB() (the default), or etcd. The daemon and the direct CLI both
// open it here. What it writes is redacted of token shapes (the daemon
// also gives it the secrets it hands agents: store.SetRedact).
func OpenStore(cfg *config.Config, paths workspace.Paths, opt store.Options) (*store.Store, error) {
	var st *store.Store
	var err error
	if cfg == nil || cfg.Store.Backend != store.BackendEtcd {
		st, err = store.Open(paths.DB(), opt)
	} else if err = StartTrust(cfg, os.Getenv); err == nil {
		st, err = store.OpenEtcd(EtcdConfig(cfg, paths), opt)
	}
	if err != nil {
		return nil, err
	}
	var shapes *redact.Redactor // nil: token shapes only
	st.SetRedact(shapes.String)
	return st, nil
}

// EtcdConfig is the store's etcd settings from cfg, file paths resolved
// and the default prefix, /loopr/<workspace directory name>, filled in.
func EtcdConfig(cfg *config.Config, paths workspace.Paths) store.EtcdConfig {
	e := cfg.Store.Etcd
	prefix := e.Prefix
	if prefix == "" {
		prefix = "/loopr/" + filepath.Base(paths.Workspace)
	}
	return store.EtcdConfig{
		Endpoints: e.Endpoints, Prefix: prefix,
		DialTimeout: time.Duration(e.DialTimeoutSecs) * time.Second,
		Username:    e.Username, Password: e.Password,
		CAFile: cfg.StorePath(e.CAFile), CertFile: cfg.StorePath(e.CertFile), KeyFile: cfg.StorePath(e.KeyFile),
	}
}
