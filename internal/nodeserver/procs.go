package nodeserver

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/nodeapi"
)

// hypervisorProcesses lists the qemu processes started for this node daemon
// (their command line names its run directory) with the uuid from their
// command line, so cluster verify can find qemu processes that no instance
// record accounts for (orphans). Several node daemons may share a machine
// in a dev cluster; each reports only its own.
func (s *Server) hypervisorProcesses(ctx context.Context, _ struct{}) (any, error) {
	out := []nodeapi.HypervisorProcess{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("qemu-system")) {
			continue
		}
		if !bytes.Contains(cmd, []byte(s.opts.RunDir+"/")) {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "qemu-system") {
			continue
		}
		p := nodeapi.HypervisorProcess{PID: pid, UID: procUID(pid)}
		for i, a := range args {
			if a == "-uuid" && i+1 < len(args) {
				p.UUID = args[i+1]
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func procUID(pid int) int {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 2 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[2])
			return uid
		}
	}
	return -1
}
