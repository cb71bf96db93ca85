package control

import (
	"path/filepath"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// OpenStore opens the store cfg's store section names: the bbolt file
// paths.DB() (the default), or etcd. The daemon and the direct CLI both
// open it here.
func OpenStore(cfg *config.Config, paths workspace.Paths, opt store.Options) (*store.Store, error) {
	if cfg == nil || cfg.Store.Backend != store.BackendEtcd {
		return store.Open(paths.DB(), opt)
	}
	return store.OpenEtcd(EtcdConfig(cfg, paths), opt)
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
