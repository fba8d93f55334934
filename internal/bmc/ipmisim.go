package bmc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// IPMISimConfig is what ipmi_sim (OpenIPMI's lanserv) needs to serve one
// machine's BMC over IPMI 2.0 lanplus on UDP.
type IPMISimConfig struct {
	Addr     string // listen address, 127.0.0.1 by default
	Port     int
	User     string
	Password string
	// ChassisControl is the chassis program and its leading arguments,
	// e.g. {"/usr/bin/corral-bmc", "chassis", "/srv/machines/node1"};
	// ipmi_sim appends "get ..." or "set ...".
	ChassisControl []string
	// SOL, when set, is the HOST:PORT of the machine's serial bridge
	// (corral-bmc sol-bridge): ipmi_sim then serves Serial-over-LAN
	// ("ipmitool sol activate") on the machine's serial console.
	SOL string
}

// solBaud is the rate ipmi_sim announces for SOL; over TCP it changes
// nothing on the line, and it matches the guest's console.
const solBaud = 115200

// IPMI 2.0 limits a user name to 16 bytes and a password to 20.
const (
	maxIPMIUser     = 16
	maxIPMIPassword = 20
)

// safeConfigWord reports whether s can stand inside ipmi_sim's quoted
// strings: its parser knows no escapes, so quotes, backslashes, blanks and
// control characters are refused.
func safeConfigWord(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '\\' || r == 0x7f || r > 0x7e {
			return false
		}
	}
	return true
}

func (c *IPMISimConfig) validate() error {
	if c.Addr == "" {
		c.Addr = "127.0.0.1"
	}
	if net.ParseIP(c.Addr) == nil {
		return ecode.Errorf(ecode.Inval, "ipmi_sim address %q is not an IP address", c.Addr)
	}
	if c.Port <= 0 || c.Port > 65535 {
		return ecode.Errorf(ecode.Inval, "ipmi_sim port %d is out of range", c.Port)
	}
	if c.User == "" || len(c.User) > maxIPMIUser || !safeConfigWord(c.User) {
		return ecode.Errorf(ecode.Inval, "IPMI user name must be 1-%d printable characters without blanks, quotes or backslashes", maxIPMIUser)
	}
	// The password is never quoted back in errors.
	if c.Password == "" || len(c.Password) > maxIPMIPassword || !safeConfigWord(c.Password) {
		return ecode.Errorf(ecode.Inval, "IPMI password must be 1-%d printable characters without blanks, quotes or backslashes", maxIPMIPassword)
	}
	if len(c.ChassisControl) == 0 {
		return ecode.Errorf(ecode.Inval, "ipmi_sim needs a chassis control program")
	}
	for _, w := range c.ChassisControl {
		if w == "" || !safeConfigWord(w) {
			return ecode.Errorf(ecode.Inval, "chassis control word %q has blanks, quotes or backslashes, which ipmi_sim cannot pass", w)
		}
	}
	if c.SOL != "" {
		host, port, err := net.SplitHostPort(c.SOL)
		if err != nil || net.ParseIP(host) == nil {
			return ecode.Errorf(ecode.Inval, "SOL bridge %q is not IP:PORT", c.SOL)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return ecode.Errorf(ecode.Inval, "SOL bridge port %q is out of range", port)
		}
		if strings.Contains(host, ":") {
			// ipmi_sim splits "tcp:HOST:PORT" at the first colon after
			// "tcp:", so an IPv6 host cannot be written.
			return ecode.Errorf(ecode.Inval, "SOL bridge %q: ipmi_sim only reaches IPv4 addresses", c.SOL)
		}
	}
	return nil
}

// WriteIPMISimConfig writes DIR/lan.conf (mode 0600: it holds the
// password, which ipmi_sim needs in clear) and DIR/bmc.emu, and returns
// their paths. Start the BMC with
//
//	ipmi_sim -c LANCONF -f EMU -s DIR/state -n
func WriteIPMISimConfig(dir string, c IPMISimConfig) (lanConf, emu string, err error) {
	if err := c.validate(); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		return "", "", fmt.Errorf("ipmi_sim directory: %w", err)
	}
	guid := make([]byte, 16)
	if _, err := rand.Read(guid); err != nil {
		return "", "", fmt.Errorf("ipmi_sim guid: %w", err)
	}
	var b strings.Builder
	b.WriteString("# ipmi_sim configuration written by corral-bmc\n")
	b.WriteString("name \"corral-bmc\"\nset_working_mc 0x20\n  startlan 1\n")
	fmt.Fprintf(&b, "    addr %s %s\n", c.Addr, strconv.Itoa(c.Port))
	b.WriteString("    priv_limit admin\n")
	for _, level := range []string{"callback", "user", "operator", "admin"} {
		fmt.Fprintf(&b, "    allowed_auths_%s md5 straight\n", level)
	}
	fmt.Fprintf(&b, "    guid %s\n  endlan\n", hex.EncodeToString(guid))
	fmt.Fprintf(&b, "  chassis_control \"%s\"\n", strings.Join(c.ChassisControl, " "))
	if c.SOL != "" {
		fmt.Fprintf(&b, "  sol \"tcp:%s\" %d\n", c.SOL, solBaud)
	}
	fmt.Fprintf(&b, "  user 2 true \"%s\" \"%s\" admin 10 md5 straight\n", c.User, c.Password)
	lanConf = filepath.Join(dir, "lan.conf")
	if err := os.WriteFile(lanConf, []byte(b.String()), 0o600); err != nil {
		return "", "", fmt.Errorf("ipmi_sim lan.conf: %w", err)
	}
	emu = filepath.Join(dir, "bmc.emu")
	emuText := "mc_setbmc 0x20\n" +
		"mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n" +
		"sel_enable 0x20 1000 0x0a\n" +
		"mc_enable 0x20\n"
	if err := os.WriteFile(emu, []byte(emuText), 0o644); err != nil {
		return "", "", fmt.Errorf("ipmi_sim emu file: %w", err)
	}
	return lanConf, emu, nil
}
