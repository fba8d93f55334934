package kvm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// readPIDFile reads the pid qemu wrote with -pidfile.
func readPIDFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("kvm: bad pid file %s", path)
	}
	return pid, nil
}

// processIsInstance reports whether pid is alive and is the qemu of the
// instance with this uuid. A pid file can outlive its process and the pid be
// reused, so the command line must carry "-uuid <uuid>". A zombie has an empty
// command line and so does not count.
func processIsInstance(pid int, uuid string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return cmdlineHasUUID(data, uuid)
}

func cmdlineHasUUID(cmdline []byte, uuid string) bool {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	for i := 0; i+1 < len(args); i++ {
		if string(args[i]) == "-uuid" && string(args[i+1]) == uuid {
			return true
		}
	}
	return false
}

// procStatus holds the fields of /proc/PID/status the driver uses.
type procStatus struct {
	UID    int   // real uid
	RSSKiB int64 // resident memory
}

func readProcStatus(pid int) (procStatus, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procStatus{}, err
	}
	return parseProcStatus(data)
}

func parseProcStatus(data []byte) (procStatus, error) {
	st := procStatus{UID: -1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "Uid":
			if uid, err := strconv.Atoi(fields[0]); err == nil && uid >= 0 {
				st.UID = uid
			}
		case "VmRSS":
			if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil && kb >= 0 {
				st.RSSKiB = kb
			}
		}
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	if st.UID < 0 {
		return st, fmt.Errorf("kvm: process status has no Uid line")
	}
	return st, nil
}

// meminfo holds the /proc/meminfo values the driver uses, in KiB.
type meminfo struct {
	TotalKiB     int64
	AvailableKiB int64
}

// maxMeminfoKiB (4 EiB) is far beyond any machine and keeps sums of values
// from overflowing.
const maxMeminfoKiB = 1 << 52

func parseMeminfo(data []byte) (meminfo, error) {
	vals := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 || n > maxMeminfoKiB {
			continue
		}
		vals[key] = n
	}
	if err := sc.Err(); err != nil {
		return meminfo{}, err
	}
	m := meminfo{TotalKiB: vals["MemTotal"]}
	if m.TotalKiB == 0 {
		return m, fmt.Errorf("kvm: /proc/meminfo has no MemTotal")
	}
	if avail, ok := vals["MemAvailable"]; ok {
		m.AvailableKiB = avail
	} else { // kernels before 3.14
		m.AvailableKiB = vals["MemFree"] + vals["Buffers"] + vals["Cached"]
	}
	m.AvailableKiB = min(m.AvailableKiB, m.TotalKiB)
	return m, nil
}
