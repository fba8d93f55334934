package kvm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// Runtime holds what the node decides for one start of an instance: where
// qemu's sockets and files go, which user it runs as and what the host's
// files and qemu support. BuildCommand turns it and the spec into argv.
type Runtime struct {
	Binary       string // qemu executable, argv[0]
	QMPSocket    string
	SerialSocket string
	SerialLog    string
	PIDFile      string
	VNCSocket    string // used when vnc_bind_address is "unix"
	// GuestAgentSocket is the node's end of the guest agent's channel
	// (use_guest_agent).
	GuestAgentSocket string
	ChrootDir        string // used when use_chroot is true
	RunAs            string // user qemu switches to after start-up; "" keeps the caller's
	// RunWith selects qemu 9's "-run-with user=,chroot=" instead of the older
	// -runas and -chroot options.
	RunWith bool
	// Sandbox adds qemu's seccomp filter (-sandbox), where qemu has one.
	Sandbox bool
	// NoDirectIO lists disk indexes whose files refuse O_DIRECT (tmpfs, some
	// network file systems): cache=none would fail there, so they get
	// writeback.
	NoDirectIO map[int]bool
	// CephFiles is the directory with the confined qemu's copies of each
	// rbd disk's ceph.conf and keyring (cephFile names them).
	CephFiles string
}

// Front-end model names for Ganeti's nic_type values.
var nicModels = map[string]string{
	hypervisor.TypeParavirtual: "virtio-net-pci",
	"e1000":                    "e1000",
	"rtl8139":                  "rtl8139",
	"ne2k_pci":                 "ne2k_pci",
	"ne2k_isa":                 "ne2k_isa",
	"i82551":                   "i82551",
	"i82557b":                  "i82557b",
	"i82559er":                 "i82559er",
	"pcnet":                    "pcnet",
}

// -drive if= values for Ganeti's disk_type values.
var diskInterfaces = map[string]string{
	hypervisor.TypeParavirtual: "virtio",
	"ide":                      "ide",
	"scsi":                     "scsi",
	"sd":                       "sd",
}

var bootDevices = map[string]string{
	hypervisor.BootDisk:    "c",
	hypervisor.BootCdrom:   "d",
	hypervisor.BootNetwork: "n",
	hypervisor.BootFloppy:  "a",
}

// BuildCommand returns qemu's argv (argv[0] is rt.Binary) for spec. It is a
// pure function of its arguments so the command line can be checked without
// running anything. spec.HVParams is merged over the kvm defaults.
func BuildCommand(spec hypervisor.InstanceSpec, rt Runtime) ([]string, error) {
	if err := hypervisor.CheckSpec(spec); err != nil {
		return nil, err
	}
	hv := hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), spec.HVParams)
	if err := hypervisor.ValidateParams(hypervisor.KVM, hv); err != nil {
		return nil, err
	}
	if rt.Binary == "" || rt.QMPSocket == "" || rt.PIDFile == "" {
		return nil, fmt.Errorf("kvm: runtime lacks binary, QMP socket or pid file")
	}

	accel := "tcg"
	if hv[hypervisor.ParamKVMFlag] == hypervisor.KVMFlagEnabled {
		accel = "kvm"
	}
	argv := []string{rt.Binary,
		"-name", spec.Name,
		"-uuid", spec.UUID,
		"-m", strconv.FormatInt(spec.MemoryMiB, 10),
		"-smp", smpArg(spec.VCPUs, hv),
		// Never "accel=kvm:tcg": where KVM initialises but cannot run guests
		// the fallback would not happen and the guest would die.
		"-accel", accel,
	}
	var machine []string
	if m := hv[hypervisor.ParamMachineVersion]; m != "" {
		machine = append(machine, m)
	}
	if !hypervisor.Bool(hv, hypervisor.ParamACPI) {
		machine = append(machine, "acpi=off")
	}
	if hv[hypervisor.ParamMemPath] != "" {
		machine = append(machine, "memory-backend="+memBackendID)
	}
	if len(machine) > 0 {
		argv = append(argv, "-machine", strings.Join(machine, ","))
	}
	if c := hv[hypervisor.ParamCPUType]; c != "" {
		argv = append(argv, "-cpu", c)
	}
	if k := hv[hypervisor.ParamKeymap]; k != "" {
		argv = append(argv, "-k", k)
	}
	argv = append(argv, memBackendArgs(spec, hv)...)
	argv = append(argv,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-daemonize", "-pidfile", rt.PIDFile,
		"-qmp", "unix:"+optEscape(rt.QMPSocket)+",server=on,wait=off",
	)

	serial := hypervisor.Bool(hv, hypervisor.ParamSerialConsole)
	if serial {
		if rt.SerialSocket == "" || rt.SerialLog == "" {
			return nil, fmt.Errorf("kvm: serial_console needs a serial socket and log path")
		}
		argv = append(argv,
			"-chardev", "socket,id=ser0,path="+optEscape(rt.SerialSocket)+",server=on,wait=off,logfile="+optEscape(rt.SerialLog),
			"-serial", "chardev:ser0")
	}

	if k := hv[hypervisor.ParamKernelPath]; k != "" {
		argv = append(argv, "-kernel", k)
		if i := hv[hypervisor.ParamInitrdPath]; i != "" {
			argv = append(argv, "-initrd", i)
		}
		var app []string
		if r := hv[hypervisor.ParamRootPath]; r != "" {
			app = append(app, "root="+r)
		}
		if a := strings.TrimSpace(hv[hypervisor.ParamKernelArgs]); a != "" {
			app = append(app, a)
		}
		if serial {
			app = append(app, "console=ttyS0,"+hv[hypervisor.ParamSerialSpeed])
		}
		if len(app) > 0 {
			argv = append(argv, "-append", strings.Join(app, " "))
		}
	} else {
		argv = append(argv, "-boot", "order="+bootDevices[hv[hypervisor.ParamBootOrder]])
	}

	if hypervisor.Bool(hv, hypervisor.ParamUseLocaltime) {
		argv = append(argv, "-rtc", "base=localtime")
	}
	if hv[hypervisor.ParamRebootBehavior] == hypervisor.RebootExit {
		argv = append(argv, "-no-reboot")
	}

	argv = append(argv, diskArgs(spec.Disks, hv, rt)...)
	if c := hv[hypervisor.ParamCdromImagePath]; c != "" {
		argv = append(argv, "-drive", "file="+optEscape(c)+",format=raw,media=cdrom,if=ide,readonly=on")
	}
	argv = append(argv, removableMediaArgs(hv)...)

	netdevMore, nicMore := netdevOptions(hv)
	for _, n := range spec.NICs {
		if n.Tap == "" {
			return nil, ecode.Errorf(ecode.Inval, "instance %s: nic %d has no tap device", spec.Name, n.Index)
		}
		argv = append(argv, "-netdev", "tap,id="+netdevID(n.Index)+",ifname="+optEscape(n.Tap)+",script=no,downscript=no"+netdevMore)
		argv = append(argv, "-device", nicDevice(hv, n)+nicMore)
	}
	// The balloon changes the guest's memory at run time (runtime_mem); it
	// sits in a fixed slot so a migration finds it where it was.
	argv = append(argv, "-device", balloonDriver+",id="+balloonID+",addr="+pciAddr(balloonSlot))
	argv = append(argv, usbArgs(hv)...)
	argv = append(argv, soundArgs(hv)...)
	qga, err := guestAgentArgs(hv, rt)
	if err != nil {
		return nil, err
	}
	argv = append(argv, qga...)
	display, err := displayArgs(spec, hv, rt)
	if err != nil {
		return nil, err
	}
	argv = append(argv, display...)

	chroot := ""
	if hypervisor.Bool(hv, hypervisor.ParamUseChroot) {
		if rt.ChrootDir == "" {
			return nil, fmt.Errorf("kvm: use_chroot needs a chroot directory")
		}
		chroot = rt.ChrootDir
	}
	switch {
	case rt.RunWith && (rt.RunAs != "" || chroot != ""):
		var parts []string
		if rt.RunAs != "" {
			parts = append(parts, "user="+optEscape(rt.RunAs))
		}
		if chroot != "" {
			parts = append(parts, "chroot="+optEscape(chroot))
		}
		argv = append(argv, "-run-with", strings.Join(parts, ","))
	case !rt.RunWith:
		if rt.RunAs != "" {
			argv = append(argv, "-runas", rt.RunAs)
		}
		if chroot != "" {
			argv = append(argv, "-chroot", chroot)
		}
	}
	if rt.Sandbox {
		argv = append(argv, "-sandbox", sandboxOption)
	}
	extra, err := kvmExtraArgs(hv)
	if err != nil {
		return nil, err
	}
	argv = append(argv, extra...)
	if spec.Incoming {
		// The address comes later over QMP (migrate-incoming), with the
		// TLS credentials.
		argv = append(argv, "-incoming", "defer")
	}
	return argv, nil
}

func diskArgs(disks []hypervisor.DiskSpec, hv map[string]string, rt Runtime) []string {
	iface := diskInterfaces[hv[hypervisor.ParamDiskType]]
	paravirtual := hotpluggable(hv[hypervisor.ParamDiskType])
	if paravirtual {
		// A separate front end with a fixed id and PCI slot: the same
		// device a hot-add creates, so a migration's destination has the
		// same devices as a source that had disks hot-added.
		iface = "none,id=" + driveID(0)
	}
	var argv []string
	for _, d := range disks {
		if paravirtual {
			iface = "none,id=" + driveID(d.Index)
		}
		opt := "file=" + optEscape(d.Path) + ",format=raw,if=" + iface
		if d.RBD != nil {
			opt = "file=" + optEscape(rbdFileName(d, rt.CephFiles)) + ",format=raw,if=" + iface
		}
		cache, aio := hv[hypervisor.ParamDiskCache], hv[hypervisor.ParamDiskAIO]
		if cache == hypervisor.CacheNone && rt.NoDirectIO[d.Index] {
			cache = hypervisor.CacheWriteback
			if aio == hypervisor.AIONative { // native AIO needs O_DIRECT
				aio = hypervisor.AIOThreads
			}
		}
		if cache != hypervisor.CacheDefault {
			opt += ",cache=" + cache
		}
		if aio != hypervisor.AIOThreads { // threads is qemu's default
			opt += ",aio=" + aio
		}
		if dd := hv[hypervisor.ParamDiskDiscard]; dd != hypervisor.DiscardDefault {
			opt += ",discard=" + dd
		}
		if d.ReadOnly {
			opt += ",readonly=on"
		}
		argv = append(argv, "-drive", opt)
		if paravirtual {
			dev := diskDriver + ",drive=" + driveID(d.Index) + ",id=" + diskDeviceID(d.Index) + ",addr=" + pciAddr(diskSlot(d.Index))
			if d.Index == 0 && hv[hypervisor.ParamKernelPath] == "" && hv[hypervisor.ParamBootOrder] == hypervisor.BootDisk {
				dev += ",bootindex=1" // -boot order=c does not reach -device disks
			}
			argv = append(argv, "-device", dev)
		}
	}
	return argv
}

// displayArgs adds the graphics card and the VNC or SPICE server.
func displayArgs(spec hypervisor.InstanceSpec, hv map[string]string, rt Runtime) ([]string, error) {
	vnc, err := vncArg(hv[hypervisor.ParamVNCBindAddress], spec, rt)
	if err != nil {
		return nil, err
	}
	spice, err := spiceArgs(spec, hv)
	if err != nil {
		return nil, err
	}
	vga := hv[hypervisor.ParamVGA]
	var argv []string
	switch {
	case vnc != "":
		if vga == "" {
			vga = "std" // -nodefaults removed the card; VNC would show nothing
		}
		tlsObject, suffix := vncTLSArgs(hv)
		argv = append(argv, tlsObject...)
		argv = append(argv, "-vga", vga, "-vnc", vnc+suffix)
	case spice != nil:
		if vga == "" {
			vga = "qxl" // Ganeti's card for SPICE
		}
		argv = append(argv, "-vga", vga)
		argv = append(argv, spice...)
	case vga != "":
		argv = append(argv, "-vga", vga)
	}
	return argv, nil
}

func vncArg(bind string, spec hypervisor.InstanceSpec, rt Runtime) (string, error) {
	switch bind {
	case "":
		return "", nil
	case hypervisor.VNCUnix:
		if rt.VNCSocket == "" {
			return "", fmt.Errorf("kvm: vnc on a unix socket needs a socket path")
		}
		return "unix:" + optEscape(rt.VNCSocket), nil
	}
	addr, err := netip.ParseAddr(bind)
	if err != nil {
		return "", ecode.Errorf(ecode.Inval, "vnc_bind_address %q: %v", bind, err)
	}
	if spec.NetworkPort < 5900 || spec.NetworkPort > 65535 {
		return "", ecode.Errorf(ecode.Inval, "instance %s: vnc on %s needs a network port of at least 5900, got %d", spec.Name, bind, spec.NetworkPort)
	}
	host := addr.String()
	if addr.Is6() && !addr.Is4In6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(spec.NetworkPort-5900), nil
}

// optEscape doubles commas, which qemu's option parser reads as separators.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
