package bmc

import (
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// cdDevice is the qemu id of the machine's CD drive, which virtual media
// changes while the machine runs.
const cdDevice = "cd0dev"

// optPath escapes a path for a qemu option list (a comma is doubled).
func optPath(p string) string { return strings.ReplaceAll(p, ",", ",,") }

// qemuArgs builds the command line powering the machine on from boot.
func (m *Machine) qemuArgs(boot string, media Media) ([]string, error) {
	c := m.Config
	mem := c.MemoryMB
	if mem == 0 {
		mem = defaultMem
	}
	args := []string{
		"-accel", "tcg", "-nodefaults", "-m", strconv.Itoa(mem), "-name", c.Name,
		"-qmp", "unix:" + optPath(m.path(qmpSocket)) + ",server=on,wait=off",
		"-chardev", "socket,id=ser0,path=" + optPath(m.path(serialSock)) + ",server=on,wait=off,logfile=" +
			optPath(m.path(SerialLog)) + ",logappend=on",
		"-serial", "chardev:ser0",
		"-monitor", "none", "-display", "none",
		"-daemonize", "-pidfile", m.path(pidFile),
	}
	switch c.Network {
	case "user":
		nd := "user,id=n0"
		if c.UserNetOptions != "" {
			nd += "," + c.UserNetOptions
		}
		args = append(args, "-netdev", nd, "-device", "virtio-net-pci,netdev=n0,mac="+c.MAC)
	case "tap":
		args = append(args, "-netdev", "tap,id=n0,ifname="+c.Tap+",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=n0,mac="+c.MAC)
	}
	if c.Disk != "" {
		args = append(args, "-drive", "file="+optPath(c.Disk)+",format=raw,if=virtio,id=disk0")
	}
	cd := "if=none,id=cd0,media=cdrom,readonly=on"
	if p := cdPath(c, media); p != "" {
		cd += ",format=raw,file=" + optPath(p)
	}
	args = append(args, "-drive", cd, "-device", "ide-cd,drive=cd0,id="+cdDevice)
	switch boot {
	case BootPXE:
		if c.Network == "" {
			return nil, ecode.Errorf(ecode.State, "machine %s has no network card to boot from (pxe)", c.Name)
		}
		args = append(args, "-boot", "order=n")
	case BootCDROM:
		args = append(args, "-boot", "order=d")
	case BootBIOS:
		// qemu's firmware has no setup screen to stop in; its boot menu
		// is the nearest thing, then the disk.
		args = append(args, "-boot", "order=c,menu=on")
	default: // disk, or no override
		if c.Kernel != "" {
			args = append(args, "-kernel", c.Kernel, "-initrd", c.Initrd)
			if c.Append != "" {
				args = append(args, "-append", c.Append)
			}
		} else {
			args = append(args, "-boot", "order=c")
		}
	}
	return args, nil
}

// cdPath is the image in the CD drive: the inserted virtual media, else the
// machine's own ISO.
func cdPath(c Config, media Media) string {
	if media.Inserted && media.Path != "" {
		return media.Path
	}
	return c.ISO
}
