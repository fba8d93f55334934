package devcluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/storecfg"
)

// markManaged records in the store record that Corral manages the
// cluster's etcd members, so that promoting a node to master candidate
// starts a member on it. The record keeps its owner (corrald reads it as
// corral-master).
func markManaged(l bootstrap.Layout) error {
	md := l.MasterDir()
	fi, err := os.Stat(storecfg.Path(md))
	if err != nil {
		return err
	}
	cfg, err := storecfg.Load(md)
	if err != nil {
		return err
	}
	cfg.Managed = &storecfg.ManagedMembers{ClientPort: etcdproc.DefaultClientPort, PeerPort: etcdproc.DefaultPeerPort}
	if err := storecfg.Save(md, cfg); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return os.Chown(storecfg.Path(md), int(st.Uid), int(st.Gid))
}

// stopNodeMembers stops the etcd members node daemons started for
// promoted candidates: they run in sessions of their own and are in no
// record of the dev cluster's processes. They are found by their data
// directory under the cluster's etcd directory.
func stopNodeMembers(stateDir string, logf func(string, ...any)) {
	base := filepath.Join(bootstrap.Layout{StateDir: stateDir}.EtcdDir(), "member-")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte("\x00--data-dir="+base)) {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) != "etcd" {
			continue
		}
		logf("Stopping the etcd member a node daemon started (pid %d)", pid)
		stop(pid, 10*time.Second)
	}
}
