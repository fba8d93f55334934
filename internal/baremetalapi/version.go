package baremetalapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Version is a Bare Metal API microversion, 1.N.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// AtLeast reports whether v is minor or later.
func (v Version) AtLeast(minor int) bool { return v.Minor >= minor }

// The served range: from Ironic's first versioned API to the last version
// whose every gate Corral honours, which is also what the openstack client
// of Debian 12 asks for (1.78).
var (
	MinVersion = Version{1, 1}
	MaxVersion = Version{1, 78}
)

// Header names of microversion negotiation.
const (
	versionHeader    = "X-OpenStack-Ironic-API-Version"
	minVersionHeader = "X-OpenStack-Ironic-API-Minimum-Version"
	maxVersionHeader = "X-OpenStack-Ironic-API-Maximum-Version"
)

// Version gates (Ironic's minor numbers) the API honours.
const (
	v3DriverInternalInfo = 3
	v5NodeName           = 5
	v8Fields             = 8
	v9ProvisionFilter    = 9
	v11Enroll            = 11
	v14StatesLinks       = 14
	v16DriverFilter      = 16
	v19PortLLC           = 19
	v21ResourceClass     = 21
	v22Lookup            = 22
	v24PortgroupsLinks   = 24
	v27SoftPower         = 27
	v30DynamicDrivers    = 30
	v31DynamicIfaces     = 31
	v32Volume            = 32
	v34PhysNet           = 34
	v36AgentVersion      = 36
	v37Traits            = 37
	v38Rescue            = 38
	v42Fault             = 42
	v46ConductorGroup    = 46
	v50Owner             = 50
	v62AgentToken        = 62
	v68VerifyCA          = 68
	v69DeploySteps       = 69
	v70DisableRamdisk    = 70
	v72AgentStatus       = 72
	v73DeployVerbs       = 73
	v75BootMode          = 75
)

// errVersion is a version header that is not 1.N or latest.
type errVersion struct{ asked string }

func (e *errVersion) Error() string { return "invalid version " + e.asked }

// negotiate reads the request's version: none means the minimum,
// "latest" the maximum. outOfRange is true for a well-formed version the
// API does not serve (406); err for a malformed header (400).
func negotiate(r *http.Request) (v Version, outOfRange bool, err error) {
	h := strings.TrimSpace(r.Header.Get(versionHeader))
	switch strings.ToLower(h) {
	case "":
		return MinVersion, false, nil
	case "latest":
		return MaxVersion, false, nil
	}
	v, ok := parseVersion(h)
	if !ok {
		return Version{}, false, &errVersion{asked: h}
	}
	if v.Major != MinVersion.Major || v.Minor < MinVersion.Minor || v.Minor > MaxVersion.Minor {
		return v, true, nil
	}
	return v, false, nil
}

// parseVersion parses "X.Y" with decimal numbers and no sign.
func parseVersion(s string) (Version, bool) {
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, false
	}
	a, err1 := strconv.ParseUint(maj, 10, 16)
	b, err2 := strconv.ParseUint(min, 10, 16)
	if err1 != nil || err2 != nil {
		return Version{}, false
	}
	return Version{int(a), int(b)}, true
}
