package cmdlib

import (
	"time"

	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/seconds"
)

// callSlack is the room a call that waits on purpose gets beyond its own
// timeout, for the node to answer once it is done.
const callSlack = 30 * time.Second

// osScriptTimeout bounds an OS definition's create or rename script.
const osScriptTimeout = 30 * time.Minute

// snapshotMinMiBps is the slowest copy of a running instance's disks a
// live export waits for (a whole disk is copied, sparse parts included).
const snapshotMinMiBps = 16

// registerCallTimeouts gives the node calls that wait on purpose (a
// guest's clean shutdown, an OS install, a disk copy, a test delay) room beyond their
// own timeout; every other call gets the RPC client's default.
func registerCallTimeouts(r *engine.Registry) {
	r.RegisterCallTimeout(nodeapi.ShutdownArgs{}, func(args any) time.Duration {
		t := seconds.Int(int64(args.(nodeapi.ShutdownArgs).Timeout))
		if t <= 0 {
			t = 2 * time.Minute
		}
		return t + callSlack
	})
	r.RegisterCallTimeout(nodeapi.RebootArgs{}, func(args any) time.Duration {
		return seconds.Int(int64(args.(nodeapi.RebootArgs).Timeout)) + 2*callSlack
	})
	osScript := func(any) time.Duration { return osScriptTimeout + callSlack }
	r.RegisterCallTimeout(nodeapi.OSCreateArgs{}, osScript)
	r.RegisterCallTimeout(nodeapi.OSRenameArgs{}, osScript)
	r.RegisterCallTimeout(nodeapi.RunCommandArgs{}, func(args any) time.Duration {
		return seconds.Duration(args.(nodeapi.RunCommandArgs).Timeout) + callSlack
	})
	r.RegisterCallTimeout(nodeapi.DiskSnapshotArgs{}, func(args any) time.Duration {
		var mib int64
		for _, d := range args.(nodeapi.DiskSnapshotArgs).Instance.Disks {
			mib += d.SizeMiB
		}
		return time.Duration(mib/snapshotMinMiBps)*time.Second + 2*time.Minute + callSlack
	})
	r.RegisterCallTimeout(nodeapi.DelayArgs{}, func(args any) time.Duration {
		return seconds.Duration(args.(nodeapi.DelayArgs).Duration) + callSlack
	})
}
