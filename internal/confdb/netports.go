package confdb

import (
	"strconv"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Ganeti's range for the ports it hands out (constants FIRST_DRBD_PORT and
// LAST_DRBD_PORT): an instance's network_port comes from it. Ganeti 3.0 has
// no opcode parameter to change the range, so neither has Corral.
const (
	FirstNetworkPort = 11000
	LastNetworkPort  = 14999
)

// NetworkPortOwner returns the uuid of the instance holding port, if any.
func (db *DB) NetworkPortOwner(port int) (string, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	u, ok := db.instPorts.owner[strconv.Itoa(port)]
	return u, ok
}

// portHold is how long a port FreeNetworkPort handed out stays out of
// other callers' reach while its transaction has not committed: long
// enough for any step, short enough that a job that failed before its
// commit does not keep the port long.
const portHold = 10 * time.Minute

// FreeNetworkPort returns the lowest port of the range no instance holds, so
// a removed instance's port is given out again first (as Ganeti's
// tcpudp_port_pool does). The port is held for the caller for a while, so
// that jobs creating instances side by side get different ports; the
// caller puts the instance holding it in a transaction, whose commit fails
// if another took the port meanwhile all the same.
func (db *DB) FreeNetworkPort() (int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.now()
	if db.portsHeld == nil {
		db.portsHeld = map[int]time.Time{}
	}
	for p, until := range db.portsHeld {
		if _, owned := db.instPorts.owner[strconv.Itoa(p)]; owned || !now.Before(until) {
			delete(db.portsHeld, p)
		}
	}
	for p := FirstNetworkPort; p <= LastNetworkPort; p++ {
		if _, taken := db.instPorts.owner[strconv.Itoa(p)]; taken {
			continue
		}
		if _, held := db.portsHeld[p]; held {
			continue
		}
		db.portsHeld[p] = now.Add(portHold)
		return p, nil
	}
	return 0, ecode.Errorf(ecode.NoRes, "No free network port left in %d-%d", FirstNetworkPort, LastNetworkPort)
}
