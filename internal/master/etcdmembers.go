package master

import (
	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/storecfg"
)

// etcdMembership gives the processor the membership API of a store on etcd
// and says whether Corral manages the members (the store record). nil when
// the store has no members to change.
func etcdMembership(opts Options, raw store.Store, d *Daemon) *cmdlib.EtcdMembership {
	api, ok := raw.(cmdlib.EtcdMemberAPI)
	if !ok {
		return nil
	}
	rec, err := storecfg.Load(opts.StateDir)
	if err != nil {
		// The record was read a moment ago to open the store; if it is
		// unreadable now, leave the members alone rather than guess.
		d.log.Warn("cannot read the store record: etcd members will not follow master candidates", "err", err)
		rec = storecfg.Config{}
	}
	return &cmdlib.EtcdMembership{API: api, Managed: rec.Managed, CA: d.ca}
}
