package driver

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// IPMI drives a BMC with ipmitool over IPMI 2.0 (lanplus). The password
// goes to ipmitool in its environment (-E reads IPMI_PASSWORD), never on
// the command line, where every user could read it in ps.
type IPMI struct {
	address, username, password string
	port, cipherSuite           int
	privLevel                   string

	// run executes ipmitool; tests replace it.
	run func(ctx context.Context, args, env []string) (stdout, stderr []byte, err error)
	// callTimeout bounds one ipmitool run; attempts bounds the runs of
	// one command when the BMC answers with a transient error; pause is
	// the wait between them and poll the interval of power state checks.
	callTimeout time.Duration
	attempts    int
	pause, poll time.Duration
}

var privLevels = []string{"ADMINISTRATOR", "OPERATOR", "USER", "CALLBACK"}

// hostRE accepts host names and IPv4/IPv6 literals: anything ipmitool -H
// takes that cannot be mistaken for an option.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9:.\[\]%_-]+$`)

func newIPMI(info map[string]any) (*IPMI, error) {
	d := &IPMI{run: runIPMITool, callTimeout: 30 * time.Second, attempts: 3, pause: time.Second, poll: time.Second}
	var err error
	if d.address, err = infoString(info, "ipmi_address", true); err != nil {
		return nil, err
	}
	if !hostRE.MatchString(d.address) || strings.HasPrefix(d.address, "-") {
		return nil, ecode.Errorf(ecode.Inval, "driver_info ipmi_address %q is not a host name or IP address", d.address)
	}
	if d.port, err = infoInt(info, "ipmi_port", 623, 1, 65535); err != nil {
		return nil, err
	}
	if d.username, err = infoString(info, "ipmi_username", false); err != nil {
		return nil, err
	}
	if d.password, err = infoString(info, "ipmi_password", false); err != nil {
		return nil, err
	}
	if d.cipherSuite, err = infoInt(info, "ipmi_cipher_suite", -1, 0, 255); err != nil {
		return nil, err
	}
	if d.privLevel, err = infoString(info, "ipmi_priv_level", false); err != nil {
		return nil, err
	}
	d.privLevel = strings.ToUpper(d.privLevel)
	if d.privLevel != "" && !contains(privLevels, d.privLevel) {
		return nil, ecode.Errorf(ecode.Inval, "driver_info ipmi_priv_level %q is not one of %s", d.privLevel, strings.Join(privLevels, ", "))
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func runIPMITool(ctx context.Context, args, env []string) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, "ipmitool", args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// baseArgs are the connection options of every call.
func (d *IPMI) baseArgs() []string {
	args := []string{"-I", "lanplus", "-H", d.address, "-p", strconv.Itoa(d.port)}
	if d.username != "" {
		args = append(args, "-U", d.username)
	}
	if d.cipherSuite >= 0 {
		args = append(args, "-C", strconv.Itoa(d.cipherSuite))
	}
	if d.privLevel != "" {
		args = append(args, "-L", d.privLevel)
	}
	if d.password != "" {
		args = append(args, "-E")
	}
	return args
}

// retryable lists ipmitool messages of a busy or briefly unreachable BMC,
// worth another attempt.
var retryable = []string{
	"insufficient resources for session",
	"Node busy",
	"Timeout",
	"Out of space",
	"BMC initialization in progress",
	"Unable to establish IPMI v2 / RMCP+ session",
}

// exec runs one ipmitool command, retrying transient failures a few times.
func (d *IPMI) exec(ctx context.Context, command ...string) (string, error) {
	args := append(d.baseArgs(), command...)
	var env []string
	if d.password != "" {
		env = []string{"IPMI_PASSWORD=" + d.password}
	}
	red := redactor{d.password}
	var lastErr error
	for attempt := 1; attempt <= d.attempts; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, d.callTimeout)
		out, errOut, err := d.run(cctx, args, env)
		cancel()
		if err == nil {
			return string(out), nil
		}
		msg := strings.TrimSpace(string(errOut))
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		lastErr = red.errorf("ipmitool %s on %s:%d failed (attempt %d of %d): %s: %w",
			strings.Join(command, " "), d.address, d.port, attempt, d.attempts, msg, err)
		if ctx.Err() != nil || !isRetryable(msg) {
			return "", lastErr
		}
		select {
		case <-ctx.Done():
			return "", lastErr
		case <-time.After(d.pause):
		}
	}
	return "", lastErr
}

func isRetryable(msg string) bool {
	for _, r := range retryable {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}

// Validate asks the BMC for the power state: it proves address and
// credentials.
func (d *IPMI) Validate(ctx context.Context) error {
	_, err := d.PowerState(ctx)
	return err
}

func (d *IPMI) PowerState(ctx context.Context) (string, error) {
	out, err := d.exec(ctx, "chassis", "power", "status")
	if err != nil {
		return "", err
	}
	return parsePowerStatus(out)
}

// parsePowerStatus reads "Chassis Power is on|off".
func parsePowerStatus(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "Chassis Power is "); ok {
			switch strings.TrimSpace(rest) {
			case "on":
				return PowerOn, nil
			case "off":
				return PowerOff, nil
			}
		}
	}
	return "", ecode.ExecErrorf("ipmitool power status answered %q, not \"Chassis Power is on|off\"", truncate(out, 200))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (d *IPMI) SetPower(ctx context.Context, target string, timeout time.Duration) error {
	if err := checkPowerTarget(target); err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = DefaultPowerTimeout
	}
	switch target {
	case PowerOn:
		return d.powerAndWait(ctx, "on", PowerOn, timeout)
	case PowerOff:
		return d.powerAndWait(ctx, "off", PowerOff, timeout)
	case SoftPowerOff:
		return d.powerAndWait(ctx, "soft", PowerOff, timeout)
	case Rebooting:
		if err := d.powerAndWait(ctx, "off", PowerOff, timeout); err != nil {
			return err
		}
		return d.powerAndWait(ctx, "on", PowerOn, timeout)
	default: // SoftRebooting
		if err := d.powerAndWait(ctx, "soft", PowerOff, timeout); err != nil {
			return err
		}
		return d.powerAndWait(ctx, "on", PowerOn, timeout)
	}
}

// powerAndWait sends "chassis power VERB" unless the machine is already in
// want, then waits for want.
func (d *IPMI) powerAndWait(ctx context.Context, verb, want string, timeout time.Duration) error {
	cur, err := d.PowerState(ctx)
	if err != nil {
		return err
	}
	if cur == want {
		return nil
	}
	if _, err := d.exec(ctx, "chassis", "power", verb); err != nil {
		return err
	}
	return waitPower(ctx, d.PowerState, want, timeout, d.poll)
}

func (d *IPMI) SetBootDevice(ctx context.Context, dev string, persistent bool) error {
	if err := checkBootDevice(dev); err != nil {
		return err
	}
	cmd := []string{"chassis", "bootdev", dev}
	if persistent {
		cmd = append(cmd, "options=persistent")
	}
	_, err := d.exec(ctx, cmd...)
	return err
}

func (d *IPMI) BootDevice(ctx context.Context) (string, error) {
	out, err := d.exec(ctx, "chassis", "bootparam", "get", "5")
	if err != nil {
		return "", err
	}
	return parseBootParam5(out)
}

// IPMI boot flags (boot option parameter 5), second data byte, bits 5:2.
var bootSelectors = map[byte]string{0x00: "", 0x01: BootPXE, 0x02: BootDisk, 0x05: BootCDROM, 0x06: BootBIOS}

// parseBootParam5 reads the device selector from the raw data line
// ("Boot parameter data: 0004000000") of "chassis bootparam get 5".
func parseBootParam5(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Boot parameter data:")
		if !ok {
			continue
		}
		data, err := hex.DecodeString(strings.TrimSpace(rest))
		if err != nil || len(data) < 2 {
			return "", ecode.ExecErrorf("boot parameter data %q is not hex of at least two bytes", strings.TrimSpace(rest))
		}
		sel := (data[1] >> 2) & 0x0f
		dev, known := bootSelectors[sel]
		if !known {
			return "", ecode.ExecErrorf("boot device selector 0x%x is not one Corral knows", sel)
		}
		return dev, nil
	}
	return "", ecode.ExecErrorf("ipmitool bootparam get 5 gave no \"Boot parameter data\" line: %q", truncate(out, 200))
}
