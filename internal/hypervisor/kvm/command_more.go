package kvm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// Ids of the objects and devices the parameters below add.
const (
	vncTLSID        = "vnctls0"
	memBackendID    = "mem0"
	guestAgentID    = "qga0"
	guestAgentPort  = "org.qemu.guest_agent.0"
	spiceAgentChan  = "spicechannel0"
	audioBackendID  = "audio0"
	spiceAgentPort  = "com.redhat.spice.0"
	guestAgentSlot  = 28 // after the NIC slots (see devices.go)
	spiceSerialSlot = 29
	soundSlot       = 30
	usbSlot         = 31
)

// smpArg is -smp's value: the vCPU count and Ganeti's optional topology.
func smpArg(vcpus int, hv map[string]string) string {
	s := strconv.Itoa(vcpus)
	for _, p := range []struct{ key, name string }{
		{hypervisor.ParamCPUCores, "cores"},
		{hypervisor.ParamCPUThreads, "threads"},
		{hypervisor.ParamCPUSockets, "sockets"},
	} {
		if v := hv[p.key]; v != "" && v != "0" {
			s += "," + p.name + "=" + v
		}
	}
	return s
}

// memBackendArgs backs guest memory with files in mem_path (a hugetlbfs
// mount, usually); share=on lets other processes map it, as Ganeti's
// -mem-path did, and prealloc takes the pages at start, not at first touch.
func memBackendArgs(spec hypervisor.InstanceSpec, hv map[string]string) []string {
	dir := hv[hypervisor.ParamMemPath]
	if dir == "" {
		return nil
	}
	return []string{"-object", "memory-backend-file,id=" + memBackendID +
		",size=" + strconv.FormatInt(spec.MemoryMiB, 10) + "M,mem-path=" + optEscape(dir) + ",share=on,prealloc=on"}
}

// removableMediaArgs adds the second CD-ROM and the floppy.
func removableMediaArgs(hv map[string]string) []string {
	var argv []string
	if c := hv[hypervisor.ParamCdrom2ImagePath]; c != "" {
		argv = append(argv, "-drive", "file="+optEscape(c)+",format=raw,media=cdrom,if=ide,readonly=on")
	}
	if f := hv[hypervisor.ParamFloppyImagePath]; f != "" {
		argv = append(argv, "-drive", "file="+optEscape(f)+",format=raw,if=floppy")
	}
	return argv
}

// soundArgs adds the sound card, fed to a silent audio backend: the node has
// no sound to play it on, the guest only needs the device.
func soundArgs(hv map[string]string) []string {
	hw := hv[hypervisor.ParamSoundHW]
	if hw == "" {
		return nil
	}
	argv := []string{"-audiodev", "none,id=" + audioBackendID}
	addr := ",addr=" + pciAddr(soundSlot)
	switch hw {
	case "ac97":
		argv = append(argv, "-device", "AC97,audiodev="+audioBackendID+addr)
	case "hda":
		argv = append(argv, "-device", "intel-hda,id=hda0"+addr, "-device", "hda-duplex,bus=hda0.0,audiodev="+audioBackendID)
	case "sb16":
		argv = append(argv, "-device", "sb16,audiodev="+audioBackendID)
	}
	return argv
}

// usbArgs adds a USB controller with the pointer and the host devices.
func usbArgs(hv map[string]string) []string {
	mouse := hv[hypervisor.ParamUSBMouse]
	devs, _ := hypervisor.ParseUSBDevices(hv[hypervisor.ParamUSBDevices]) // validated
	if mouse == "" && len(devs) == 0 {
		return nil
	}
	argv := []string{"-device", "qemu-xhci,id=usb0,addr=" + pciAddr(usbSlot)}
	switch mouse {
	case "mouse":
		argv = append(argv, "-device", "usb-mouse,bus=usb0.0")
	case "tablet":
		argv = append(argv, "-device", "usb-tablet,bus=usb0.0")
	}
	for _, d := range devs {
		argv = append(argv, "-device", fmt.Sprintf("usb-host,bus=usb0.0,vendorid=0x%04x,productid=0x%04x", d.Vendor, d.Product))
	}
	return argv
}

// guestAgentArgs gives the guest agent its virtio serial port, with the
// node's end a socket in the run directory.
func guestAgentArgs(hv map[string]string, rt Runtime) ([]string, error) {
	if !hypervisor.Bool(hv, hypervisor.ParamUseGuestAgent) {
		return nil, nil
	}
	if rt.GuestAgentSocket == "" {
		return nil, fmt.Errorf("kvm: use_guest_agent needs a guest agent socket path")
	}
	return []string{
		"-chardev", "socket,id=" + guestAgentID + ",path=" + optEscape(rt.GuestAgentSocket) + ",server=on,wait=off",
		"-device", "virtio-serial-pci,id=" + guestAgentID + "serial,addr=" + pciAddr(guestAgentSlot),
		"-device", "virtserialport,bus=" + guestAgentID + "serial.0,chardev=" + guestAgentID + ",name=" + guestAgentPort,
	}, nil
}

// vncTLSArgs returns the TLS credentials object and the -vnc suffix for
// vnc_tls, vnc_x509_path, vnc_x509_verify and vnc_password_file. The
// password itself goes over QMP after start, never on the command line.
func vncTLSArgs(hv map[string]string) (object []string, suffix string) {
	if hypervisor.Bool(hv, hypervisor.ParamVNCTLS) {
		obj := "tls-creds-anon,id=" + vncTLSID + ",endpoint=server"
		if dir := hv[hypervisor.ParamVNCX509Path]; dir != "" {
			verify := "off"
			if hypervisor.Bool(hv, hypervisor.ParamVNCX509Verify) {
				verify = "on"
			}
			obj = "tls-creds-x509,id=" + vncTLSID + ",endpoint=server,dir=" + optEscape(dir) + ",verify-peer=" + verify
		}
		object = []string{"-object", obj}
		suffix += ",tls-creds=" + vncTLSID
	}
	if hv[hypervisor.ParamVNCPasswordFile] != "" {
		suffix += ",password=on"
	}
	return object, suffix
}

// spiceArgs builds -spice and the agent channel for spice_bind. Without a
// password file tickets are off, as in Ganeti; with one, qemu refuses every
// client until the node sets the password over QMP.
func spiceArgs(spec hypervisor.InstanceSpec, hv map[string]string) ([]string, error) {
	bind := hv[hypervisor.ParamSpiceBind]
	if bind == "" {
		return nil, nil
	}
	addr, err := netip.ParseAddr(bind)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "spice_bind %q: %w", bind, err)
	}
	if spec.NetworkPort <= 0 || spec.NetworkPort > 65535 {
		return nil, ecode.Errorf(ecode.Inval, "instance %s: spice needs a network port, got %d", spec.Name, spec.NetworkPort)
	}
	opt := []string{"addr=" + addr.String(), "port=" + strconv.Itoa(spec.NetworkPort)}
	if hv[hypervisor.ParamSpicePasswordFile] == "" {
		opt = append(opt, "disable-ticketing=on")
	}
	switch hv[hypervisor.ParamSpiceIPVersion] {
	case "4":
		opt = append(opt, "ipv4=on")
	case "6":
		opt = append(opt, "ipv6=on")
	}
	for _, p := range []struct{ key, name string }{
		{hypervisor.ParamSpiceImageCompression, "image-compression"},
		{hypervisor.ParamSpiceJPEGWANCompression, "jpeg-wan-compression"},
		{hypervisor.ParamSpiceZlibGLZWANCompr, "zlib-glz-wan-compression"},
		{hypervisor.ParamSpiceStreamingVideo, "streaming-video"},
	} {
		if v := hv[p.key]; v != "" {
			opt = append(opt, p.name+"="+v)
		}
	}
	if !hypervisor.Bool(hv, hypervisor.ParamSpicePlaybackCompression) {
		opt = append(opt, "playback-compression=off")
	}
	var argv []string
	if hypervisor.Bool(hv, hypervisor.ParamSpiceUseVDAgent) {
		argv = append(argv,
			"-device", "virtio-serial-pci,id=spiceserial,addr="+pciAddr(spiceSerialSlot),
			"-chardev", "spicevmc,id="+spiceAgentChan+",name=vdagent",
			"-device", "virtserialport,bus=spiceserial.0,chardev="+spiceAgentChan+",name="+spiceAgentPort)
	} else {
		opt = append(opt, "agent-mouse=off")
	}
	return append(argv, "-spice", strings.Join(opt, ",")), nil
}

// netdevOptions are the -netdev tap additions for vhost_net and
// virtio_net_queues, and the matching virtio-net-pci options.
func netdevOptions(hv map[string]string) (netdev, device string) {
	if hypervisor.Bool(hv, hypervisor.ParamVhostNet) {
		netdev += ",vhost=on"
	}
	if q := hypervisor.NetQueues(hv); q > 1 {
		netdev += ",queues=" + strconv.Itoa(q)
		device = ",mq=on,vectors=" + strconv.Itoa(2*q+2)
	}
	return netdev, device
}

// kvmExtraArgs are kvm_extra's arguments, split as a shell would.
func kvmExtraArgs(hv map[string]string) ([]string, error) {
	args, err := hypervisor.SplitKVMExtra(hv[hypervisor.ParamKVMExtra])
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "kvm_extra: %w", err)
	}
	return args, nil
}
