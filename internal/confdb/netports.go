package confdb

import (
	"strconv"

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

// FreeNetworkPort returns the lowest port of the range no instance holds, so
// a removed instance's port is given out again first (as Ganeti's
// tcpudp_port_pool does). The caller puts the instance holding it in a
// transaction, whose commit fails if another took the port meanwhile.
func (db *DB) FreeNetworkPort() (int, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for p := FirstNetworkPort; p <= LastNetworkPort; p++ {
		if _, taken := db.instPorts.owner[strconv.Itoa(p)]; !taken {
			return p, nil
		}
	}
	return 0, ecode.Errorf(ecode.NoRes, "No free network port left in %d-%d", FirstNetworkPort, LastNetworkPort)
}
