// Package bootstrap creates a cluster on disk: the users and directories of
// the security model, the CA and certificates, the domain secret and the
// initial configuration in a new store. `corral cluster init` and
// `corral dev up` use it.
package bootstrap

import "github.com/corral/corral/internal/layout"

// The layout of a machine and the names of the security model live in the
// leaf package layout, so that the node daemon can name them without
// linking cluster creation; bootstrap's callers keep using them from here.
const (
	DefaultStateDir = layout.DefaultStateDir
	DefaultRunDir   = layout.DefaultRunDir
	MasterUser      = layout.MasterUser
	QemuUser        = layout.QemuUser
	AdminGroup      = layout.AdminGroup
	RAPIUser        = layout.RAPIUser
)

// Files of the RAPI directory.
const (
	RAPICertFile  = layout.RAPICertFile
	RAPIKeyFile   = layout.RAPIKeyFile
	RAPIUsersFile = layout.RAPIUsersFile
	RAPICAFile    = layout.RAPICAFile
)

// Layout names the directories of one machine's share of a cluster.
type Layout = layout.Layout
