package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Version is a Container Infra API microversion, 1.N.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// AtLeast reports whether v is 1.minor or later.
func (v Version) AtLeast(minor int) bool { return v.Minor >= minor }

// The served range: Magnum's first version to the Antelope-era server's
// last (1.11), what the Debian 12 client is used against.
var (
	MinVersion = Version{1, 1}
	MaxVersion = Version{1, 11}
)

// Version headers.
const (
	versionHeader    = "OpenStack-API-Version"
	minVersionHeader = "OpenStack-API-Minimum-Version"
	maxVersionHeader = "OpenStack-API-Maximum-Version"
)

// serviceNames are the service names the version header accepts; replies
// use the first.
var serviceNames = []string{"container-infrastructure-management", "container-infrastructure", "container-infra"}

// Version gates (Magnum's minor numbers).
const (
	v4Stats      = 4
	v5CARotate   = 5
	v6Quotas     = 6
	v7Resize     = 7
	v7Upgrade    = 7 // introduced in 1.8; the 1.7 server accepted it too
	v9NodeGroups = 9
	v10ZeroNodes = 10
)

// headerValue is the header's form of v.
func headerValue(v Version) string { return serviceNames[0] + " " + v.String() }

// negotiate reads the version a request asks for: none is the minimum,
// "latest" the maximum. A malformed header is an error; a version outside
// the range is returned with outOfRange set.
func negotiate(r *http.Request) (v Version, outOfRange bool, err error) {
	hdr := strings.TrimSpace(r.Header.Get(versionHeader))
	if hdr == "" {
		return MinVersion, false, nil
	}
	fields := strings.Fields(hdr)
	if len(fields) != 2 {
		return Version{}, false, notAcceptable("Invalid service type for %s header", versionHeader)
	}
	service, ver := strings.ToLower(fields[0]), fields[1]
	if strings.EqualFold(ver, "latest") {
		ver = MaxVersion.String()
	}
	if !slices.Contains(serviceNames, service) {
		return Version{}, false, notAcceptable("Invalid service type for %s header", versionHeader)
	}
	major, minor, ok := strings.Cut(ver, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || ma < 0 || mi < 0 {
		return Version{}, false, notAcceptable("Invalid value for %s header", versionHeader)
	}
	v = Version{ma, mi}
	if v.Major != MaxVersion.Major || v.Minor < MinVersion.Minor || v.Minor > MaxVersion.Minor {
		return v, true, nil
	}
	return v, false, nil
}

// gate refuses a request below the version an API needs, as Magnum's
// versioned methods do (406).
func gate(c *call, minor int, api string) error {
	if c.v.AtLeast(minor) {
		return nil
	}
	return notAcceptable("Version %s was requested but the requested API %s is not supported for this version.", c.v, api)
}
