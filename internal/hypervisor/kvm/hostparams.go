package kvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// vhostNetDevice is the kernel's vhost-net device; vhost_net needs it.
var vhostNetDevice = "/dev/vhost-net"

// checkHostParams checks, before qemu starts, what only the node can: the
// files and directories the parameters name, the node's CPUs for cpu_mask
// and the kernel's vhost-net device. uid and gid are qemu's user (-1: the
// caller's).
func checkHostParams(spec hypervisor.InstanceSpec, hv map[string]string, uid, gid int) error {
	inval := func(format string, a ...any) error {
		return ecode.Errorf(ecode.Inval, "instance %s: "+format, append([]any{spec.Name}, a...)...)
	}
	if _, err := cpuPinning(hv[hypervisor.ParamCPUMask], spec.VCPUs, runtime.NumCPU()); err != nil {
		return inval("%w", err)
	}
	if hypervisor.Bool(hv, hypervisor.ParamVhostNet) {
		if _, err := os.Stat(vhostNetDevice); err != nil {
			return ecode.Errorf(ecode.Environ, "instance %s: vhost_net needs %s, which this node lacks (load the vhost_net module): %w", spec.Name, vhostNetDevice, err)
		}
	}
	if dir := hv[hypervisor.ParamMemPath]; dir != "" {
		if err := checkUsableDir(dir, uid, gid); err != nil {
			return inval("mem_path: %w", err)
		}
	}
	if dir := hv[hypervisor.ParamVNCX509Path]; dir != "" {
		files := []string{"ca-cert.pem", "server-cert.pem", "server-key.pem"}
		for _, f := range files {
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || !st.Mode().IsRegular() {
				return inval("vnc_x509_path %s lacks %s (it needs %s)", dir, f, strings.Join(files, ", "))
			}
		}
	}
	for _, k := range []string{hypervisor.ParamVNCPasswordFile, hypervisor.ParamSpicePasswordFile,
		hypervisor.ParamCdrom2ImagePath, hypervisor.ParamFloppyImagePath} {
		if p := hv[k]; p != "" {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return inval("%s %s is not a readable file", k, p)
			}
		}
	}
	return nil
}

// checkUsableDir reports whether dir is a directory qemu's user may create
// files in (by the mode bits; root's qemu may use any directory).
func checkUsableDir(dir string, uid, gid int) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if uid < 0 {
		return nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner information", dir)
	}
	mode := st.Mode().Perm()
	var need os.FileMode
	switch {
	case int(sys.Uid) == uid:
		need = 0o300
	case int(sys.Gid) == gid:
		need = 0o030
	default:
		need = 0o003
	}
	if mode&need != need {
		return fmt.Errorf("qemu's user (uid %d) cannot create files in %s (mode %v, owner %d:%d)", uid, dir, mode, sys.Uid, sys.Gid)
	}
	return nil
}

// cpuPinning turns cpu_mask into one CPU list per vCPU (nil: any CPU), or
// a nil result when nothing is pinned. A single entry applies to every
// vCPU, as in Ganeti; otherwise there must be one entry per vCPU.
func cpuPinning(mask string, vcpus, nodeCPUs int) ([][]int, error) {
	entries, err := hypervisor.ParseCPUMask(mask)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		for _, c := range e {
			if c >= nodeCPUs {
				return nil, fmt.Errorf("cpu_mask %q names CPU %d, but the node has %d CPUs", mask, c, nodeCPUs)
			}
		}
	}
	if len(entries) == 1 {
		if entries[0] == nil {
			return nil, nil
		}
		out := make([][]int, vcpus)
		for i := range out {
			out[i] = entries[0]
		}
		return out, nil
	}
	if len(entries) != vcpus {
		return nil, fmt.Errorf("Number of vCPUs (%d) doesn't match the number of CPU mask entries (%d)", vcpus, len(entries))
	}
	return entries, nil
}

// vcpuThreads asks qemu for the thread id of each vCPU, by cpu index.
func vcpuThreads(ctx context.Context, c *qmpClient) (map[int]int, error) {
	raw, err := c.Execute(ctx, "query-cpus-fast", nil)
	if err != nil {
		return nil, err
	}
	var cpus []struct {
		Index  int `json:"cpu-index"`
		Thread int `json:"thread-id"`
	}
	if err := json.Unmarshal(raw, &cpus); err != nil {
		return nil, fmt.Errorf("query-cpus-fast: %w", err)
	}
	out := make(map[int]int, len(cpus))
	for _, c := range cpus {
		out[c.Index] = c.Thread
	}
	return out, nil
}

// setAffinity restricts one thread to cpus (nil: every CPU of the node).
func setAffinity(tid int, cpus []int) error {
	var set unix.CPUSet
	if cpus == nil {
		for c := 0; c < runtime.NumCPU(); c++ {
			set.Set(c)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	return unix.SchedSetaffinity(tid, &set)
}

// pinProcess restricts every thread of qemu to cpus: a cpu_mask of one
// entry places the whole machine, as in Ganeti.
func pinProcess(pid int, cpus []int) error {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := setAffinity(tid, cpus); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d: %w", tid, err)
		}
	}
	return nil
}

// pinVCPUs applies cpu_mask to the running qemu's vCPU threads.
func pinVCPUs(ctx context.Context, c *qmpClient, pins [][]int) error {
	threads, err := vcpuThreads(ctx, c)
	if err != nil {
		return err
	}
	for i, cpus := range pins {
		tid, ok := threads[i]
		if !ok {
			return fmt.Errorf("qemu reports no thread for vCPU %d", i)
		}
		if err := setAffinity(tid, cpus); err != nil {
			return fmt.Errorf("pinning vCPU %d (thread %d): %w", i, tid, err)
		}
	}
	return nil
}

// helpHasSpice reports whether qemu's help text offers -spice.
func helpHasSpice(help string) bool {
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "-spice ") {
			return true
		}
	}
	return false
}

// readPasswordFile returns the first line of a console password file.
func readPasswordFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// afterStart does what the parameters need of a running qemu: vCPU pinning
// and console passwords. Its errors never carry a password.
func afterStart(ctx context.Context, qmpSocket string, pid int, spec hypervisor.InstanceSpec, hv map[string]string) error {
	pins, err := cpuPinning(hv[hypervisor.ParamCPUMask], spec.VCPUs, runtime.NumCPU())
	if err != nil {
		return err
	}
	passwords := map[string]string{"vnc": hv[hypervisor.ParamVNCPasswordFile], "spice": hv[hypervisor.ParamSpicePasswordFile]}
	if hv[hypervisor.ParamVNCBindAddress] == "" {
		passwords["vnc"] = ""
	}
	if hv[hypervisor.ParamSpiceBind] == "" {
		passwords["spice"] = ""
	}
	if pins == nil && passwords["vnc"] == "" && passwords["spice"] == "" {
		return nil
	}
	c, err := dialQMP(ctx, qmpSocket)
	if err != nil {
		return err
	}
	defer c.Close()
	if entries, _ := hypervisor.ParseCPUMask(hv[hypervisor.ParamCPUMask]); len(entries) == 1 && pins != nil {
		if err := pinProcess(pid, entries[0]); err != nil {
			return fmt.Errorf("cpu_mask: %w", err)
		}
	} else if pins != nil {
		if err := pinVCPUs(ctx, c, pins); err != nil {
			return fmt.Errorf("cpu_mask: %w", err)
		}
	}
	for _, protocol := range []string{"vnc", "spice"} {
		file := passwords[protocol]
		if file == "" {
			continue
		}
		pw, err := readPasswordFile(file)
		if err != nil {
			return fmt.Errorf("%s password file: %w", protocol, err)
		}
		if _, err := c.Execute(ctx, "set_password", map[string]string{"protocol": protocol, "password": pw}); err != nil {
			var qe *QMPError
			if errors.As(err, &qe) {
				return fmt.Errorf("setting the %s password: qemu refused (%s)", protocol, qe.Class)
			}
			return fmt.Errorf("setting the %s password: %w", protocol, err)
		}
	}
	return nil
}
