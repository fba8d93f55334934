package kvm

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openTap attaches to the existing tap device name and returns one file
// per queue (a tap made with more than one queue is multi-queue), with the
// flags qemu itself asks for when it opens a tap by name (no packet
// information, virtio-net headers). qemu opens a tap by name only
// while it still runs as root, before -runas drops its privileges; a NIC
// added later is opened here, by corral-node, and its descriptor handed
// to qemu (getfd), so qemu's user never needs /dev/net/tun, which is
// often root's alone (0600) where no udev rule opens it up.
func openTap(name string, queues int) ([]*os.File, error) {
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tap name %q is too long", name)
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if queues > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	var files []*os.File
	for range max(queues, 1) {
		f, err := openTapQueue(name, flags)
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func openTapQueue(name string, flags uint16) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var ifr [unix.IFNAMSIZ + 64]byte
	copy(ifr[:unix.IFNAMSIZ], name)
	*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = flags
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("attach to tap %s: %w", name, errno)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
