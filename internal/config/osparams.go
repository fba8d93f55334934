package config

import "strings"

// ClusterOSParams are the cluster's OS parameters for osName ("os" or
// "os+variant") in Ganeti's lookup order: those set for the OS, overridden
// by those set for the exact OS+variant.
func ClusterOSParams(c *Cluster, osName string) Params {
	if c == nil {
		return Params{}
	}
	base, _, hasVariant := strings.Cut(osName, "+")
	out := Fill(nil, c.OSParams[base])
	if hasVariant {
		out = Fill(out, c.OSParams[osName])
	}
	return out
}

// ClusterPrivateOSParams are the cluster's private OS parameters for osName
// (osparams_private_cluster), in ClusterOSParams's order.
func ClusterPrivateOSParams(c *Cluster, osName string) Params {
	if c == nil {
		return Params{}
	}
	base, _, hasVariant := strings.Cut(osName, "+")
	out := Fill(nil, c.OSParamsPrivate[base])
	if hasVariant {
		out = Fill(out, c.OSParamsPrivate[osName])
	}
	return out
}

// InstancePrivateOSParams are an instance's private OS parameters, filled
// from the cluster's private ones for its OS.
func InstancePrivateOSParams(c *Cluster, osName string, private Params) Params {
	return Fill(ClusterPrivateOSParams(c, osName), private)
}

// InstanceOSParams are an instance's public OS parameters, filled from the
// cluster's for its OS as ClusterOSParams orders them.
func InstanceOSParams(c *Cluster, inst *Instance) Params {
	return Fill(ClusterOSParams(c, inst.OS), inst.OSParams)
}

// HVDefaults are the hypervisor parameters an instance of osName gets by
// default: the cluster's for hv, then the os_hvp ones for the OS, then
// those for the exact OS+variant (Ganeti's GetHVDefaults looks the OS up
// by the instance's OS name as given; the OS alone is Corral's addition,
// in the same order as OS parameters).
func HVDefaults(c *Cluster, hv, osName string) Params {
	if c == nil {
		return Params{}
	}
	out := Fill(nil, c.HVParams[hv])
	base, _, hasVariant := strings.Cut(osName, "+")
	if base != "" {
		out = Fill(out, c.OSHVParams[base][hv])
	}
	if hasVariant {
		out = Fill(out, c.OSHVParams[osName][hv])
	}
	return out
}

// InstanceHVParams are an instance's filled hypervisor parameters.
func InstanceHVParams(c *Cluster, inst *Instance) Params {
	return Fill(HVDefaults(c, inst.Hypervisor, inst.OS), inst.HVParams)
}
