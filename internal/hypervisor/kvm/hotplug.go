package kvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

var _ hypervisor.Hotplugger = (*Hypervisor)(nil)

// deviceDeleteWait bounds how long a hot-removal waits for the guest to
// release the device: qemu removes a PCI device only once the guest's
// kernel has acknowledged the unplug request.
const deviceDeleteWait = 30 * time.Second

// running loads the record of a running instance, with its hypervisor
// parameters merged over the defaults.
func (h *Hypervisor) running(name string) (*record, map[string]string, error) {
	rec, pid, err := h.find(name)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil || pid == 0 {
		return nil, nil, hypervisor.NotRunning(name)
	}
	hv := hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), rec.Spec.HVParams)
	return rec, hv, nil
}

// HotplugSupported refuses what Corral cannot hot-add: non-paravirtual
// devices (no fixed slot, often no hotplug in the guest's bus), and a
// chrooted qemu (it could not open a new disk file by path).
func (h *Hypervisor) HotplugSupported(ctx context.Context, name string) error {
	_, hv, err := h.running(name)
	if err != nil {
		return err
	}
	return hotplugRefusal(hv)
}

func hotplugRefusal(hv map[string]string) error {
	if !hotpluggable(hv[hypervisor.ParamDiskType]) || !hotpluggable(hv[hypervisor.ParamNICType]) {
		return ecode.Errorf(ecode.State, "Hotplug is supported only for paravirtual disk_type and nic_type (have %s and %s)",
			hv[hypervisor.ParamDiskType], hv[hypervisor.ParamNICType])
	}
	if hypervisor.Bool(hv, hypervisor.ParamUseChroot) {
		return ecode.Errorf(ecode.State, "Hotplug is not supported for a chrooted instance (use_chroot)")
	}
	if m := hv[hypervisor.ParamMachineVersion]; strings.Contains(m, "q35") {
		return ecode.Errorf(ecode.State, "Hotplug is not supported on machine type %s: its root bus has no hotplug slots", m)
	}
	return nil
}

// HotAddDisk attaches a disk file as a virtio-blk device with the id and
// slot a cold start gives it.
func (h *Hypervisor) HotAddDisk(ctx context.Context, name string, d hypervisor.DiskSpec) error {
	defer h.lock(name)()
	rec, hv, err := h.running(name)
	if err != nil {
		return err
	}
	if err := hotplugRefusal(hv); err != nil {
		return err
	}
	if d.RBD != nil {
		return ecode.Errorf(ecode.State, "Hotplug of rbd disks is not supported")
	}
	if d.Index < 0 || d.Index >= maxDiskSlots {
		return ecode.Errorf(ecode.Inval, "disk index %d out of range", d.Index)
	}
	direct, err := supportsDirectIO(d.Path)
	if err != nil {
		return ecode.Errorf(ecode.Environ, "disk %d of %s: %v", d.Index, name, err)
	}
	c, err := dialQMP(ctx, rec.path(fileQMP))
	if err != nil {
		return ecode.ExecErrorf("hotplug disk %d into %s: %w", d.Index, name, err)
	}
	defer c.Close()
	// qemu no longer runs as root and may not reach the file by path: the
	// node opens it and hands qemu the descriptor in an fd set.
	fdset, err := passDiskFile(ctx, c, d)
	if err != nil {
		return ecode.ExecErrorf("hotplug disk %d into %s: %w", d.Index, name, err)
	}
	args := blockdevArgs(d, hv, direct)
	args["file"].(map[string]any)["filename"] = "/dev/fdset/" + strconv.Itoa(fdset)
	_, err = c.Execute(ctx, "blockdev-add", args)
	// The fd set's own descriptor is not needed once qemu holds a copy.
	_, _ = c.Execute(ctx, "remove-fd", map[string]any{"fdset-id": fdset})
	if err != nil {
		return ecode.ExecErrorf("hotplug disk %d into %s: %w", d.Index, name, err)
	}
	dev := map[string]any{"driver": diskDriver, "drive": driveID(d.Index), "id": diskDeviceID(d.Index), "addr": pciAddr(diskSlot(d.Index))}
	if _, err := c.Execute(ctx, "device_add", dev); err != nil {
		_, _ = c.Execute(ctx, "blockdev-del", map[string]any{"node-name": driveID(d.Index)})
		return ecode.ExecErrorf("hotplug disk %d into %s: %w", d.Index, name, err)
	}
	rec.Spec.Disks = append(slices.DeleteFunc(rec.Spec.Disks, func(x hypervisor.DiskSpec) bool { return x.Index == d.Index }), d)
	return h.saveRecord(rec)
}

// passDiskFile opens a disk file and adds it to a new fd set of qemu's,
// returning the set's id.
func passDiskFile(ctx context.Context, c *qmpClient, d hypervisor.DiskSpec) (int, error) {
	flags := os.O_RDWR
	if d.ReadOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(d.Path, flags, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	raw, err := c.ExecuteWithFD(ctx, "add-fd", map[string]any{"opaque": "disk" + strconv.Itoa(d.Index)}, int(f.Fd()))
	if err != nil {
		return 0, err
	}
	var info struct {
		FDSetID int `json:"fdset-id"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return 0, fmt.Errorf("add-fd: %w", err)
	}
	return info.FDSetID, nil
}

// blockdevArgs is blockdev-add's argument for a raw disk file, with the
// cache and aio modes a cold start would give it.
func blockdevArgs(d hypervisor.DiskSpec, hv map[string]string, direct bool) map[string]any {
	cache, aio := hv[hypervisor.ParamDiskCache], hv[hypervisor.ParamDiskAIO]
	if cache == hypervisor.CacheNone && !direct {
		cache = hypervisor.CacheWriteback
		if aio == hypervisor.AIONative {
			aio = hypervisor.AIOThreads
		}
	}
	file := map[string]any{"driver": "file", "filename": d.Path, "aio": aio}
	// qemu's cache modes as the two flags blockdev-add takes.
	cacheFlags := map[string][2]bool{ // direct, no-flush
		hypervisor.CacheNone: {true, false}, hypervisor.CacheWriteback: {false, false},
		hypervisor.CacheWritethrough: {false, false}, hypervisor.CacheDefault: {false, false},
	}
	f, ok := cacheFlags[cache]
	if !ok {
		f = [2]bool{false, false}
	}
	cacheArg := map[string]any{"direct": f[0], "no-flush": f[1]}
	file["cache"] = cacheArg
	return map[string]any{"driver": "raw", "node-name": driveID(d.Index), "file": file,
		"read-only": d.ReadOnly, "cache": cacheArg}
}

// HotRemoveDisk unplugs disk index and releases its block node. A disk
// given on the command line goes with its device; one added by
// blockdev-add stays until deleted.
func (h *Hypervisor) HotRemoveDisk(ctx context.Context, name string, index int) error {
	return h.hotRemove(ctx, name, "disk", index, diskDeviceID(index),
		"blockdev-del", map[string]any{"node-name": driveID(index)}, func(rec *record) {
			rec.Spec.Disks = slices.DeleteFunc(rec.Spec.Disks, func(x hypervisor.DiskSpec) bool { return x.Index == index })
		})
}

// hotRemove unplugs the device id of a running instance, then has qemu
// drop its backend (backendCmd with backendArgs; one already gone is
// fine) and records the change made by drop.
func (h *Hypervisor) hotRemove(ctx context.Context, name, kind string, index int, id, backendCmd string, backendArgs map[string]any, drop func(*record)) error {
	defer h.lock(name)()
	rec, hv, err := h.running(name)
	if err != nil {
		return err
	}
	if err := hotplugRefusal(hv); err != nil {
		return err
	}
	if err := deleteDevice(ctx, rec.path(fileQMP), id); err != nil {
		return ecode.ExecErrorf("hot-remove %s %d from %s: %w", kind, index, name, err)
	}
	if _, err := qmpDo(ctx, rec.path(fileQMP), backendCmd, backendArgs); err != nil && !isNotFound(err) {
		return ecode.ExecErrorf("hot-remove %s %d from %s: %w", kind, index, name, err)
	}
	drop(rec)
	return h.saveRecord(rec)
}

// HotAddNIC opens the NIC's tap (created by the caller) in qemu and adds
// the virtio-net device with the id and slot a cold start gives it.
func (h *Hypervisor) HotAddNIC(ctx context.Context, name string, n hypervisor.NICSpec) error {
	defer h.lock(name)()
	rec, hv, err := h.running(name)
	if err != nil {
		return err
	}
	if err := hotplugRefusal(hv); err != nil {
		return err
	}
	if n.Index < 0 || n.Index >= maxNICSlots || n.Tap == "" {
		return ecode.Errorf(ecode.Inval, "nic %d: index out of range or no tap", n.Index)
	}
	c, err := dialQMP(ctx, rec.path(fileQMP))
	if err != nil {
		return ecode.ExecErrorf("hotplug nic %d into %s: %w", n.Index, name, err)
	}
	defer c.Close()
	// qemu runs as its own user by now: the node opens the tap (one
	// descriptor per queue) and hands qemu the descriptors under names
	// netdev_add then uses.
	queues := max(hypervisor.NetQueues(hv), 1)
	taps, err := openTap(n.Tap, queues)
	if err != nil {
		return ecode.ExecErrorf("hotplug nic %d into %s: %w", n.Index, name, err)
	}
	defer closeAll(taps)
	var fdNames []string
	closeFDs := func() {
		for _, fd := range fdNames {
			_, _ = c.Execute(ctx, "closefd", map[string]any{"fdname": fd})
		}
	}
	for i, tap := range taps {
		fdName := netdevID(n.Index) + "-tap" + strconv.Itoa(i)
		if _, err := c.ExecuteWithFD(ctx, "getfd", map[string]any{"fdname": fdName}, int(tap.Fd())); err != nil {
			closeFDs()
			return ecode.ExecErrorf("hotplug nic %d into %s: pass the tap: %w", n.Index, name, err)
		}
		fdNames = append(fdNames, fdName)
	}
	netdev := map[string]any{"type": "tap", "id": netdevID(n.Index)}
	if queues > 1 {
		netdev["fds"] = strings.Join(fdNames, ":")
	} else {
		netdev["fd"] = fdNames[0]
	}
	if hypervisor.Bool(hv, hypervisor.ParamVhostNet) { // as a cold start's -netdev
		netdev["vhost"] = true
	}
	if _, err := c.Execute(ctx, "netdev_add", netdev); err != nil {
		closeFDs()
		return ecode.ExecErrorf("hotplug nic %d into %s: %w", n.Index, name, err)
	}
	dev := map[string]any{"driver": nicDriver, "netdev": netdevID(n.Index), "id": nicDeviceID(n.Index), "addr": pciAddr(nicSlot(n.Index))}
	if q := hypervisor.NetQueues(hv); q > 1 { // as a cold start's -device
		dev["mq"] = true
		dev["vectors"] = 2*q + 2
	}
	if n.MAC != "" {
		dev["mac"] = n.MAC
	}
	if _, err := c.Execute(ctx, "device_add", dev); err != nil {
		_, _ = c.Execute(ctx, "netdev_del", map[string]any{"id": netdevID(n.Index)})
		return ecode.ExecErrorf("hotplug nic %d into %s: %w", n.Index, name, err)
	}
	rec.Spec.NICs = append(slices.DeleteFunc(rec.Spec.NICs, func(x hypervisor.NICSpec) bool { return x.Index == n.Index }), n)
	return h.saveRecord(rec)
}

// HotRemoveNIC unplugs NIC index and closes its tap in qemu; the caller
// deletes the tap.
func (h *Hypervisor) HotRemoveNIC(ctx context.Context, name string, index int) error {
	return h.hotRemove(ctx, name, "nic", index, nicDeviceID(index),
		"netdev_del", map[string]any{"id": netdevID(index)}, func(rec *record) {
			rec.Spec.NICs = slices.DeleteFunc(rec.Spec.NICs, func(x hypervisor.NICSpec) bool { return x.Index == index })
		})
}

// deleteDevice asks qemu to unplug a device and waits until it is gone from
// the machine's peripherals, which happens once the guest let it go.
func deleteDevice(ctx context.Context, sock, id string) error {
	if _, err := qmpDo(ctx, sock, "device_del", map[string]any{"id": id}); err != nil {
		return err
	}
	deadline := time.Now().Add(deviceDeleteWait)
	for {
		present, err := hasPeripheral(ctx, sock, id)
		if err != nil {
			return err
		}
		if !present {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest did not release device %s within %s (does its kernel support PCI hotplug?)", id, deviceDeleteWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// hasPeripheral says whether a device with this id is plugged in.
func hasPeripheral(ctx context.Context, sock, id string) (bool, error) {
	raw, err := qmpDo(ctx, sock, "qom-list", map[string]any{"path": "/machine/peripheral"})
	if err != nil {
		return false, err
	}
	var props []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &props); err != nil {
		return false, fmt.Errorf("qom-list: %w", err)
	}
	for _, p := range props {
		if p.Name == id {
			return true, nil
		}
	}
	return false, nil
}

func isNotFound(err error) bool {
	var qe *QMPError
	return errors.As(err, &qe) && (qe.Class == "DeviceNotFound" || strings.Contains(qe.Desc, "not found") || strings.Contains(qe.Desc, "Cannot find") || strings.Contains(qe.Desc, "Failed to find"))
}

// SetMemory sets the balloon's target: the guest gives back or takes
// memory up to the size it was started with.
func (h *Hypervisor) SetMemory(ctx context.Context, name string, mib int64) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	if mib <= 0 || mib > rec.Spec.MemoryMiB {
		return ecode.Errorf(ecode.Inval, "Instance %s can have at most %d MiB of memory without a restart", name, rec.Spec.MemoryMiB)
	}
	if _, err := qmpDo(ctx, rec.path(fileQMP), "balloon", map[string]any{"value": mib << 20}); err != nil {
		return ecode.ExecErrorf("balloon of %s: %w", name, err)
	}
	return nil
}

// BalloonMiB is the guest's memory as its balloon reports it.
func (h *Hypervisor) BalloonMiB(ctx context.Context, name string) (int64, error) {
	rec, _, err := h.running(name)
	if err != nil {
		return 0, err
	}
	raw, err := qmpDo(ctx, rec.path(fileQMP), "query-balloon", nil)
	if err != nil {
		return 0, err
	}
	var b struct {
		Actual int64 `json:"actual"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return 0, fmt.Errorf("query-balloon: %w", err)
	}
	return b.Actual >> 20, nil
}

// ResizeDisk tells qemu the new size of disk index (block_resize), so the
// guest sees its disk grow.
func (h *Hypervisor) ResizeDisk(ctx context.Context, name string, index int, mib int64) error {
	defer h.lock(name)()
	rec, hv, err := h.running(name)
	if err != nil {
		return err
	}
	args := map[string]any{"size": mib << 20}
	if hotpluggable(hv[hypervisor.ParamDiskType]) {
		args["device"] = driveID(index)
	} else {
		// if=virtio/ide/... drives get qemu's own ids: "virtio0", "ide0-hd0"...
		return ecode.Errorf(ecode.State, "Instance %s has disk_type %s: only paravirtual disks are resized while running", name, hv[hypervisor.ParamDiskType])
	}
	_, err = qmpDo(ctx, rec.path(fileQMP), "block_resize", args)
	if err != nil && isNotFound(err) {
		// Added by blockdev-add: a node name, no drive of that name.
		delete(args, "device")
		args["node-name"] = driveID(index)
		_, err = qmpDo(ctx, rec.path(fileQMP), "block_resize", args)
	}
	if err != nil {
		return ecode.ExecErrorf("block_resize of disk %d of %s: %w", index, name, err)
	}
	for i := range rec.Spec.Disks {
		if rec.Spec.Disks[i].Index == index {
			rec.Spec.Disks[i].SizeMiB = mib
		}
	}
	return h.saveRecord(rec)
}
