package hypervisor

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Hypervisor parameter names (Ganeti's).
const (
	ParamKernelPath     = "kernel_path"
	ParamInitrdPath     = "initrd_path"
	ParamRootPath       = "root_path"
	ParamKernelArgs     = "kernel_args"
	ParamSerialConsole  = "serial_console"
	ParamSerialSpeed    = "serial_speed"
	ParamACPI           = "acpi"
	ParamBootOrder      = "boot_order"
	ParamCdromImagePath = "cdrom_image_path"
	ParamNICType        = "nic_type"
	ParamDiskType       = "disk_type"
	ParamDiskCache      = "disk_cache"
	ParamDiskAIO        = "disk_aio"
	ParamVNCBindAddress = "vnc_bind_address"
	ParamKVMFlag        = "kvm_flag"
	ParamCPUType        = "cpu_type"
	ParamMachineVersion = "machine_version"
	ParamRebootBehavior = "reboot_behavior"
	ParamSecurityModel  = "security_model"
	ParamSecurityDomain = "security_domain"
	ParamUseChroot      = "use_chroot"
	ParamUseLocaltime   = "use_localtime"
	ParamVGA            = "vga"
	// Migration parameters, Ganeti's names. migration_bandwidth is MiB/s,
	// migration_downtime milliseconds; migration_caps is a colon-separated
	// list of qemu migration capabilities, where "postcopy-ram" lets a
	// migration that does not converge switch to post-copy.
	ParamMigrationPort      = "migration_port"
	ParamMigrationBandwidth = "migration_bandwidth"
	ParamMigrationDowntime  = "migration_downtime"
	ParamMigrationMode      = "migration_mode"
	ParamMigrationCaps      = "migration_caps"
)

// Migration modes (Ganeti's HT_MIGRATION_MODES).
const (
	MigrationLive    = "live"
	MigrationNonLive = "non-live"
)

// CapPostcopy is the migration_caps entry that allows post-copy.
const CapPostcopy = "postcopy-ram"

// Values with a meaning of their own.
const (
	KVMFlagEnabled  = "enabled"
	KVMFlagDisabled = "disabled"

	BootDisk    = "disk"
	BootCdrom   = "cdrom"
	BootNetwork = "network"
	BootFloppy  = "floppy"

	TypeParavirtual = "paravirtual"

	CacheDefault      = "default"
	CacheNone         = "none"
	CacheWritethrough = "writethrough"
	CacheWriteback    = "writeback"

	AIOThreads = "threads"
	AIONative  = "native"
	AIOIOURing = "io_uring"

	RebootReboot = "reboot"
	RebootExit   = "exit"

	SecurityNone = "none"
	SecurityUser = "user"
	SecurityPool = "pool"

	// VNCUnix as vnc_bind_address puts the VNC server on a unix socket in the
	// instance's run directory instead of a TCP port: reachable only from the
	// node, which is the safe default for a proxied console.
	VNCUnix = "unix"
)

// param describes one hypervisor parameter: its default and its check.
type param struct {
	def   string
	check func(string) error
}

// kvmParams is the parameter table of the kvm hypervisor. The fake hypervisor
// shares it, so instance templates and validation behave the same whichever
// of the two a cluster runs.
var kvmParams = map[string]param{
	ParamKernelPath:     {"", checkPathOrEmpty},
	ParamInitrdPath:     {"", checkPathOrEmpty},
	ParamRootPath:       {"/dev/vda", checkPathOrEmpty},
	ParamKernelArgs:     {"ro", checkKernelArgs},
	ParamSerialConsole:  {"true", checkBool},
	ParamSerialSpeed:    {"38400", checkEnum("9600", "19200", "38400", "57600", "115200")},
	ParamACPI:           {"true", checkBool},
	ParamBootOrder:      {BootDisk, checkEnum(BootDisk, BootCdrom, BootNetwork, BootFloppy)},
	ParamCdromImagePath: {"", checkPathOrEmpty},
	ParamNICType:        {TypeParavirtual, checkEnum(TypeParavirtual, "e1000", "rtl8139", "ne2k_pci", "ne2k_isa", "i82551", "i82557b", "i82559er", "pcnet")},
	ParamDiskType:       {TypeParavirtual, checkEnum(TypeParavirtual, "ide", "scsi", "sd")},
	ParamDiskCache:      {CacheNone, checkEnum(CacheDefault, CacheNone, CacheWritethrough, CacheWriteback)},
	ParamDiskAIO:        {AIOThreads, checkEnum(AIOThreads, AIONative, AIOIOURing)},
	ParamVNCBindAddress: {"", checkVNCAddress},
	ParamKVMFlag:        {"", checkEnum("", KVMFlagEnabled, KVMFlagDisabled)},
	ParamCPUType:        {"", checkWord(",+=")},
	ParamMachineVersion: {"", checkWord("")},
	ParamRebootBehavior: {RebootReboot, checkEnum(RebootReboot, RebootExit)},
	ParamSecurityModel:  {SecurityNone, checkEnum(SecurityNone, SecurityUser, SecurityPool)},
	ParamSecurityDomain: {"", checkUserName},
	ParamUseChroot:      {"false", checkBool},
	ParamUseLocaltime:   {"false", checkBool},
	ParamVGA:            {"", checkEnum("", "std", "cirrus", "vmware", "qxl", "virtio", "none")},
	// Ganeti's defaults: port 8102, 32 MiB/s, 30 ms, live.
	ParamMigrationPort:      {"8102", checkIntRange(1, 65535)},
	ParamMigrationBandwidth: {"32", checkIntRange(1, 1<<20)},
	ParamMigrationDowntime:  {"30", checkIntRange(1, 3600*1000)},
	ParamMigrationMode:      {MigrationLive, checkEnum(MigrationLive, MigrationNonLive)},
	ParamMigrationCaps:      {"", checkMigrationCaps},
}

// migrationCaps are the capabilities migration_caps may name.
var migrationCaps = []string{CapPostcopy, "xbzrle", "auto-converge", "zero-blocks", "compress", "multifd"}

func checkIntRange(lo, hi int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return errorf("%q is not an integer from %d to %d", s, lo, hi)
		}
		return nil
	}
}

func checkMigrationCaps(s string) error {
	if s == "" {
		return nil
	}
	for _, c := range strings.Split(s, ":") {
		if !slices.Contains(migrationCaps, c) {
			return errorf("migration capability %q is not one of %s", c, strings.Join(migrationCaps, ", "))
		}
	}
	return nil
}

// MigrationCaps splits a filled parameter set's migration_caps.
func MigrationCaps(hv map[string]string) []string {
	if hv[ParamMigrationCaps] == "" {
		return nil
	}
	return strings.Split(hv[ParamMigrationCaps], ":")
}

// fakeParams are the fake hypervisor's own parameters: Ganeti's
// migration_mode, and the migration_* parameters of Corral's migration,
// which moves a fake instance's record over the same TLS stream a kvm
// migration uses. It runs nothing, so nothing else can be chosen.
var fakeParams = map[string]param{}

func init() {
	for _, k := range []string{ParamMigrationMode, ParamMigrationPort, ParamMigrationBandwidth, ParamMigrationDowntime, ParamMigrationCaps} {
		fakeParams[k] = kvmParams[k]
	}
}

func table(name string) map[string]param {
	switch name {
	case KVM:
		return kvmParams
	case Fake:
		return fakeParams
	}
	return nil
}

// DefaultParams returns a fresh copy of the hypervisor's parameter defaults,
// nil for an unknown hypervisor. Its keys are the parameters the hypervisor
// accepts.
func DefaultParams(name string) map[string]string {
	t := table(name)
	if t == nil {
		return nil
	}
	out := make(map[string]string, len(t))
	for k, p := range t {
		out[k] = p.def
	}
	return out
}

// ValidateParams checks hv against the named hypervisor's table. hv should be
// the filled set (defaults, cluster and instance values merged); keys it lacks
// take their defaults for the checks that span several parameters.
func ValidateParams(name string, hv map[string]string) error {
	t := table(name)
	if t == nil {
		return ecode.Errorf(ecode.Inval, "unknown hypervisor %q", name)
	}
	keys := make([]string, 0, len(hv))
	for k := range hv {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report the same error every time
	for _, k := range keys {
		p, ok := t[k]
		if !ok {
			return ecode.Errorf(ecode.Inval, "hypervisor %s: unknown parameter %q", name, k)
		}
		if err := p.check(hv[k]); err != nil {
			return ecode.Errorf(ecode.Inval, "hypervisor %s: parameter %s: %v", name, k, err)
		}
	}
	full := MergeParams(DefaultParams(name), hv)
	switch full[ParamSecurityModel] {
	case SecurityUser:
		if full[ParamSecurityDomain] == "" {
			return errorf("hypervisor %s: security_model user needs security_domain", name)
		}
	default:
		if full[ParamSecurityDomain] != "" {
			return errorf("hypervisor %s: security_domain must be empty unless security_model is user", name)
		}
	}
	if full[ParamBootOrder] == BootCdrom && full[ParamCdromImagePath] == "" {
		return errorf("hypervisor %s: boot_order cdrom needs cdrom_image_path", name)
	}
	if full[ParamDiskAIO] == AIONative && full[ParamDiskCache] != CacheNone {
		return errorf("hypervisor %s: disk_aio native needs disk_cache none", name)
	}
	if (full[ParamInitrdPath] != "") && full[ParamKernelPath] == "" {
		return errorf("hypervisor %s: initrd_path needs kernel_path", name)
	}
	return validateKVMMore(name, full)
}

// ParseBool reads a boolean parameter as Ganeti's CLI writes it.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1", "t", "y":
		return true, nil
	case "false", "no", "off", "0", "f", "n":
		return false, nil
	}
	return false, errorf("%q is not a boolean", s)
}

// Bool reads a boolean parameter that has already been validated; a bad
// value counts as false.
func Bool(hv map[string]string, key string) bool {
	b, _ := ParseBool(hv[key])
	return b
}

func checkBool(s string) error {
	_, err := ParseBool(s)
	return err
}

func checkEnum(values ...string) func(string) error {
	return func(s string) error {
		if slices.Contains(values, s) {
			return nil
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strconv.Quote(v)
		}
		return errorf("%q is not one of %s", s, strings.Join(quoted, ", "))
	}
}

func checkPathOrEmpty(s string) error {
	if s == "" {
		return nil
	}
	if !strings.HasPrefix(s, "/") {
		return errorf("%q is not an absolute path", s)
	}
	if strings.ContainsAny(s, "\x00\n") {
		return errorf("path contains a NUL or newline")
	}
	return nil
}

func checkKernelArgs(s string) error {
	if strings.ContainsAny(s, "\x00\n\r") {
		return errorf("kernel arguments contain a NUL or line break")
	}
	return nil
}

// checkWord accepts "" or letters, digits, '_', '-', '.' and the given extra
// characters: enough for qemu CPU models and machine types, and nothing that
// could smuggle another option into the command line.
func checkWord(extra string) func(string) error {
	return func(s string) error {
		for _, r := range s {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
				r == '_' || r == '-' || r == '.' || strings.ContainsRune(extra, r)
			if !ok {
				return errorf("character %q not allowed in %q", r, s)
			}
		}
		if strings.HasPrefix(s, "-") {
			return errorf("%q must not start with '-'", s)
		}
		return nil
	}
}

func checkUserName(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 32 || s == "root" {
		return errorf("%q is not an acceptable user name", s)
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '-')
		if !ok {
			return errorf("%q is not a valid user name", s)
		}
	}
	return nil
}

func checkVNCAddress(s string) error {
	if s == "" || s == VNCUnix {
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		return errorf("%q is neither an IP address nor %q", s, VNCUnix)
	}
	return nil
}
