package config

// Defaults for a new cluster. Hypervisor defaults come from the hypervisor
// packages at init time; these are the cluster-wide ones.

// DefaultBEParams are Ganeti's backend parameter defaults.
func DefaultBEParams() Params {
	return Params{
		"maxmem": float64(128), "minmem": float64(128), "vcpus": float64(1),
		"auto_balance": true, "always_failover": false, "spindle_use": float64(1),
	}
}

// DefaultNICParams are Ganeti's NIC defaults (bridged on the default bridge).
func DefaultNICParams() Params {
	return Params{"mode": "bridged", "link": "br0", "vlan": ""}
}

// BEParamType returns the type ("int" or "bool") of a backend parameter an
// instance may set, and false for unknown names.
func BEParamType(key string) (string, bool) {
	switch key {
	case "maxmem", "minmem", "memory", "vcpus", "spindle_use":
		return "int", true
	case "auto_balance", "always_failover":
		return "bool", true
	}
	return "", false
}

// Cluster-level defaults.
const (
	DefaultMACPrefix         = "aa:00:00"
	DefaultMaxRunningJobs    = 20
	DefaultMaxTrackedJobs    = 25
	DefaultJobQueueSize      = 5000
	DefaultCandidatePoolSize = 10
	DefaultRPCPort           = 1811
	ConfigVersion            = 3010000
)
