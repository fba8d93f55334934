package kvm

import (
	"strconv"

	"github.com/corral/corral/internal/hypervisor"
)

// Paravirtual devices get fixed ids and PCI slots derived from their index:
// a device added by hotplug is then named and placed exactly as it is at a
// cold start with the same configuration, which a live migration needs (the
// destination is started from the configuration and must have the source's
// device tree).
//
// Slot plan on the machine's root PCI bus: 0 and 1 belong to the chipset,
// 2 is left to a graphics card, 3 holds the balloon, disks take 4..19 and
// NICs 20..27 (Ganeti allows 16 disks and 8 NICs).
const (
	balloonSlot   = 3
	firstDiskSlot = 4
	firstNICSlot  = 20
	maxDiskSlots  = 16
	maxNICSlots   = 8

	diskDriver    = "virtio-blk-pci"
	nicDriver     = "virtio-net-pci"
	balloonDriver = "virtio-balloon-pci"
	balloonID     = "balloon0"
)

// hotpluggable says whether a disk_type or nic_type value is the paravirtual
// one, the only kind Corral hot-adds and hot-removes.
func hotpluggable(typ string) bool { return typ == hypervisor.TypeParavirtual }

func driveID(idx int) string      { return "drive" + strconv.Itoa(idx) }
func diskDeviceID(idx int) string { return "disk" + strconv.Itoa(idx) }
func netdevID(idx int) string     { return "n" + strconv.Itoa(idx) }
func nicDeviceID(idx int) string  { return "nic" + strconv.Itoa(idx) }
func diskSlot(idx int) int        { return firstDiskSlot + idx }
func nicSlot(idx int) int         { return firstNICSlot + idx }
func pciAddr(slot int) string     { return "0x" + strconv.FormatInt(int64(slot), 16) }

// nicDevice is the -device value of one NIC.
func nicDevice(hv map[string]string, n hypervisor.NICSpec) string {
	dev := nicModels[hv[hypervisor.ParamNICType]] + ",netdev=" + netdevID(n.Index)
	if n.MAC != "" {
		dev += ",mac=" + n.MAC
	}
	if hotpluggable(hv[hypervisor.ParamNICType]) {
		dev += ",id=" + nicDeviceID(n.Index) + ",addr=" + pciAddr(nicSlot(n.Index))
	}
	return dev
}
