package hypervisor

import (
	"maps"
	"net/netip"
	"strconv"
	"strings"
)

// More of Ganeti 3.0's kvm parameter names: CPU placement and topology,
// console (VNC and SPICE) security, devices and memory backing.
const (
	ParamCPUMask    = "cpu_mask"
	ParamCPUCores   = "cpu_cores"
	ParamCPUThreads = "cpu_threads"
	ParamCPUSockets = "cpu_sockets"

	ParamVNCTLS          = "vnc_tls"
	ParamVNCX509Path     = "vnc_x509_path"
	ParamVNCX509Verify   = "vnc_x509_verify"
	ParamVNCPasswordFile = "vnc_password_file"
	ParamKeymap          = "keymap"

	ParamSpiceBind                = "spice_bind"
	ParamSpiceIPVersion           = "spice_ip_version"
	ParamSpicePasswordFile        = "spice_password_file"
	ParamSpiceImageCompression    = "spice_image_compression"
	ParamSpiceJPEGWANCompression  = "spice_jpeg_wan_compression"
	ParamSpiceZlibGLZWANCompr     = "spice_zlib_glz_wan_compression"
	ParamSpiceStreamingVideo      = "spice_streaming_video"
	ParamSpicePlaybackCompression = "spice_playback_compression"
	ParamSpiceUseTLS              = "spice_use_tls"
	ParamSpiceTLSCiphers          = "spice_tls_ciphers"
	ParamSpiceUseVDAgent          = "spice_use_vdagent"

	ParamUSBMouse         = "usb_mouse"
	ParamUSBDevices       = "usb_devices"
	ParamMemPath          = "mem_path"
	ParamDiskDiscard      = "disk_discard"
	ParamCdrom2ImagePath  = "cdrom2_image_path"
	ParamFloppyImagePath  = "floppy_image_path"
	ParamSoundHW          = "soundhw"
	ParamKVMExtra         = "kvm_extra"
	ParamUseGuestAgent    = "use_guest_agent"
	ParamVirtioNetQueues  = "virtio_net_queues"
	ParamVhostNet         = "vhost_net"
	ParamUserShutdown     = "user_shutdown"
	CPUMaskAll            = "all"
	DiscardDefault        = "default"
	spiceDefaultTLSCipher = "HIGH:-DES:-3DES:-EXPORT:-DH"
)

// kvmMoreParams joins kvmParams at start-up; Ganeti's defaults.
var kvmMoreParams = map[string]param{
	ParamCPUMask:    {CPUMaskAll, checkCPUMask},
	ParamCPUCores:   {"0", checkNonNegative},
	ParamCPUThreads: {"0", checkNonNegative},
	ParamCPUSockets: {"0", checkNonNegative},

	ParamVNCTLS:          {"false", checkBool},
	ParamVNCX509Path:     {"", checkPathOrEmpty},
	ParamVNCX509Verify:   {"false", checkBool},
	ParamVNCPasswordFile: {"", checkPathOrEmpty},
	ParamKeymap:          {"", checkWord("")},

	ParamSpiceBind:                {"", checkIPOrEmpty},
	ParamSpiceIPVersion:           {"0", checkSpiceIPVersion},
	ParamSpicePasswordFile:        {"", checkPathOrEmpty},
	ParamSpiceImageCompression:    {"", checkEnum("", "auto_glz", "auto_lz", "glz", "quic", "off", "lz")},
	ParamSpiceJPEGWANCompression:  {"", checkEnum("", "always", "auto", "never")},
	ParamSpiceZlibGLZWANCompr:     {"", checkEnum("", "always", "auto", "never")},
	ParamSpiceStreamingVideo:      {"", checkEnum("", "off", "all", "filter")},
	ParamSpicePlaybackCompression: {"true", checkBool},
	ParamSpiceUseTLS:              {"false", checkSpiceUseTLS},
	ParamSpiceTLSCiphers:          {spiceDefaultTLSCipher, checkWord(":+!@=")},
	ParamSpiceUseVDAgent:          {"true", checkBool},

	ParamUSBMouse:        {"", checkEnum("", "mouse", "tablet")},
	ParamUSBDevices:      {"", checkUSBDevices},
	ParamMemPath:         {"", checkPathOrEmpty},
	ParamDiskDiscard:     {DiscardDefault, checkEnum(DiscardDefault, "ignore", "unmap")},
	ParamCdrom2ImagePath: {"", checkPathOrEmpty},
	ParamFloppyImagePath: {"", checkPathOrEmpty},
	ParamSoundHW:         {"", checkEnum("", "ac97", "hda", "sb16")},
	ParamKVMExtra:        {"", checkKVMExtra},
	ParamUseGuestAgent:   {"false", checkBool},
	ParamVirtioNetQueues: {"1", checkVirtioNetQueues},
	ParamVhostNet:        {"false", checkBool},
	ParamUserShutdown:    {"false", checkUserShutdown},
}

func init() { maps.Copy(kvmParams, kvmMoreParams) }

// spiceOnlyParams need spice_bind (Ganeti's list).
var spiceOnlyParams = []string{
	ParamSpiceIPVersion, ParamSpicePasswordFile, ParamSpiceImageCompression,
	ParamSpiceJPEGWANCompression, ParamSpiceZlibGLZWANCompr, ParamSpiceStreamingVideo,
	ParamSpiceUseTLS,
}

// validateKVMMore checks what spans several of the parameters above, on the
// filled set.
func validateKVMMore(name string, full map[string]string) error {
	if Bool(full, ParamVNCX509Verify) && full[ParamVNCX509Path] == "" {
		return errorf("hypervisor %s: %s must be defined, if %s is", name, ParamVNCX509Path, ParamVNCX509Verify)
	}
	vncIP := full[ParamVNCBindAddress] != "" && full[ParamVNCBindAddress] != VNCUnix
	for _, k := range []string{ParamVNCTLS, ParamVNCX509Verify} {
		if Bool(full, k) && !vncIP {
			return errorf("hypervisor %s: %s needs vnc_bind_address to be an IP address", name, k)
		}
	}
	if full[ParamVNCX509Path] != "" && !Bool(full, ParamVNCTLS) {
		return errorf("hypervisor %s: %s needs %s", name, ParamVNCX509Path, ParamVNCTLS)
	}
	if full[ParamVNCPasswordFile] != "" && full[ParamVNCBindAddress] == "" {
		return errorf("hypervisor %s: %s needs vnc_bind_address", name, ParamVNCPasswordFile)
	}
	bind := full[ParamSpiceBind]
	if bind == "" {
		for _, k := range spiceOnlyParams {
			set := full[k] != "" && full[k] != "0"
			if k == ParamSpiceUseTLS {
				set = Bool(full, k) // stored configurations may spell it False
			}
			if set {
				return errorf("hypervisor %s: SPICE: %s requires %s to be set", name, k, ParamSpiceBind)
			}
		}
		return nil
	}
	if full[ParamVNCBindAddress] != "" {
		return errorf("hypervisor %s: Both SPICE and VNC are configured, but only one of them can be used at a given time", name)
	}
	addr, _ := netip.ParseAddr(bind)
	switch v := full[ParamSpiceIPVersion]; {
	case v == "4" && !addr.Is4():
		return errorf("hypervisor %s: SPICE: Got an IPv6 address (%s), but the specified IP version is %s", name, bind, v)
	case v == "6" && addr.Is4():
		return errorf("hypervisor %s: SPICE: Got an IPv4 address (%s), but the specified IP version is %s", name, bind, v)
	}
	return nil
}

// ParseCPUMask reads Ganeti's multiple CPU mask: a colon-separated list of
// entries, each "all" or a comma list of CPU numbers and ranges ("0-2,4").
// "all" comes back as a nil entry.
func ParseCPUMask(s string) ([][]int, error) {
	var out [][]int
	for _, entry := range strings.Split(s, ":") {
		if entry == CPUMaskAll {
			out = append(out, nil)
			continue
		}
		var cpus []int
		seen := map[int]bool{}
		for _, part := range strings.Split(entry, ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || l < 0 || strings.Contains(hi, "-") {
				return nil, errorf("Multiple CPU mask definition is not well-formed: %q", s)
			}
			if l > h {
				return nil, errorf("Invalid CPU ID range definition (%d > %d): %s", l, h, part)
			}
			if h >= 4096 {
				return nil, errorf("CPU %d in %q is beyond any node", h, s)
			}
			for c := l; c <= h; c++ {
				if !seen[c] {
					seen[c] = true
					cpus = append(cpus, c)
				}
			}
		}
		out = append(out, cpus)
	}
	return out, nil
}

func checkCPUMask(s string) error {
	_, err := ParseCPUMask(s)
	return err
}

func checkNonNegative(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errorf("%q is not an integer", s)
	}
	if n < 0 {
		return errorf("cannot be negative")
	}
	if n > 1024 {
		return errorf("%d is more than qemu allows", n)
	}
	return nil
}

func checkIPOrEmpty(s string) error {
	if s == "" {
		return nil
	}
	if _, err := netip.ParseAddr(s); err != nil {
		return errorf("%q is not an IP address", s)
	}
	return nil
}

func checkSpiceIPVersion(s string) error {
	if s == "0" || s == "4" || s == "6" {
		return nil
	}
	return errorf("The SPICE IP version should be 4 or 6")
}

// checkSpiceUseTLS refuses TLS for SPICE: Ganeti serves it with the
// cluster's SPICE certificate, which a Corral cluster does not have.
func checkSpiceUseTLS(s string) error {
	b, err := ParseBool(s)
	if err != nil {
		return err
	}
	if b {
		return errorf("SPICE over TLS is not supported: the cluster has no SPICE certificate; use vnc_tls with vnc_x509_path")
	}
	return nil
}

func checkUserShutdown(s string) error {
	b, err := ParseBool(s)
	if err != nil {
		return err
	}
	if b {
		return errorf("user shutdown is not supported (the cluster's enabled_user_shutdown is false)")
	}
	return nil
}

// NetQueues is the number of queue pairs of each paravirtual NIC: 1 unless
// virtio_net_queues asks for more.
func NetQueues(hv map[string]string) int {
	full := MergeParams(DefaultParams(KVM), hv)
	q, err := strconv.Atoi(full[ParamVirtioNetQueues])
	if err != nil || q < 1 || full[ParamNICType] != TypeParavirtual {
		return 1
	}
	return q
}

// MultiQueueTaps says whether an instance's taps must be multi-queue.
func MultiQueueTaps(hv map[string]string) bool { return NetQueues(hv) > 1 }

func checkVirtioNetQueues(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 8 {
		return errorf("invalid number of queues: %q (1 to 8)", s)
	}
	return nil
}

// USBDevice is one usb_devices entry, vendor and product id.
type USBDevice struct{ Vendor, Product uint16 }

// ParseUSBDevices reads usb_devices: a comma list of vendor:product ids in
// hex ("046d:c52b"), as lsusb prints them.
func ParseUSBDevices(s string) ([]USBDevice, error) {
	if s == "" {
		return nil, nil
	}
	var out []USBDevice
	for _, d := range strings.Split(s, ",") {
		v, p, ok := strings.Cut(strings.TrimSpace(d), ":")
		vn, err1 := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 16)
		pn, err2 := strconv.ParseUint(strings.TrimPrefix(p, "0x"), 16, 16)
		if !ok || err1 != nil || err2 != nil {
			return nil, errorf("usb device %q is not vendor:product in hex (as lsusb shows it)", d)
		}
		out = append(out, USBDevice{uint16(vn), uint16(pn)})
	}
	return out, nil
}

func checkUSBDevices(s string) error {
	_, err := ParseUSBDevices(s)
	return err
}

// kvmExtraForbidden are the qemu options kvm_extra may not carry: they would
// undo the confinement or the control the node keeps over qemu.
var kvmExtraForbidden = []string{
	"-runas", "-run-with", "-chroot", "-sandbox", "-daemonize", "-pidfile",
	"-qmp", "-monitor", "-incoming", "-name", "-uuid", "-readconfig",
}

// SplitKVMExtra splits kvm_extra into arguments the way a shell would
// (quotes and backslashes, no expansion).
func SplitKVMExtra(s string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		inArg bool
		quote rune
		esc   bool
	)
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, inArg = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if esc || quote != 0 {
		return nil, errorf("kvm_extra has an unterminated quote or escape")
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

func checkKVMExtra(s string) error {
	if strings.ContainsAny(s, "\x00\n\r") {
		return errorf("kvm_extra contains a NUL or line break")
	}
	args, err := SplitKVMExtra(s)
	if err != nil {
		return err
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		opt, _, _ := strings.Cut(a, "=")
		opt = "-" + strings.TrimLeft(opt, "-")
		for _, f := range kvmExtraForbidden {
			if opt == f {
				return errorf("kvm_extra may not contain %s: the node sets it", f)
			}
		}
	}
	return nil
}
