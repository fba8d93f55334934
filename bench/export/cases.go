package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

// measure runs case c once on src and checks its copy.
func (b *bench) measure(ctx context.Context, c string, src *source) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if b.o.prime {
		if err := harness.PrimeMemory(filepath.Join(b.a.State.StateDir, "bench-prime"), b.size); err != nil {
			return sample{}, err
		}
	}
	cpu0 := b.cpu()
	s, err := b.runCase(ctx, c, src)
	s.cpu -= cpu0
	return s, err
}

// cpu is the CPU time so far of every daemon of the dev clusters (with the
// scripts the node daemons ran) and of this program's children (socat,
// the move command).
func (b *bench) cpu() time.Duration {
	t := harness.ChildrenCPU()
	for _, c := range []*harness.Cluster{b.a, b.b} {
		if c == nil || c.State == nil {
			continue
		}
		for _, p := range c.State.Procs {
			if st, err := harness.ReadStat(p.PID); err == nil {
				t += st.CPU() + st.Children
			}
		}
	}
	return t
}

// runCase runs one case; its sample's cpu is b.cpu() at the end of the
// timed part, before the copy is checked.
func (b *bench) runCase(ctx context.Context, c string, src *source) (sample, error) {
	switch c {
	case "socat", "socat+sync":
		return b.socat(ctx, *src, c == "socat+sync")
	case "export":
		return b.export(ctx, *src)
	case "import":
		return b.importExport(ctx, src)
	case "move":
		return b.move(ctx, *src)
	}
	return sample{}, fmt.Errorf("unknown case %q", c)
}

// socat copies the disk file from node1's address to a file next to
// node2's directory.
func (b *bench) socat(ctx context.Context, src source, sync bool) (sample, error) {
	dst := filepath.Join(b.a.State.StateDir, "node2", "bench-socat.dump")
	_ = os.Remove(dst)
	defer os.Remove(dst)
	timed, cleanup, err := harness.Socat{Recv: b.recv, Send: b.send, Listen: b.a.State.IPs[1], Sync: sync}.Start(ctx, src.path, dst)
	if err != nil {
		return sample{}, err
	}
	defer cleanup()
	t0 := time.Now()
	if err := timed(); err != nil {
		return sample{}, err
	}
	s := sample{total: time.Since(t0), cpu: b.cpu()}
	return s, b.check(src, dst)
}

// exportDump is the image of disk 0 in the export of instance name on
// node2.
func (b *bench) exportDump(name string) string {
	return filepath.Join(b.a.State.StateDir, "node2", "export", name, "disk0.dump")
}

// export runs `backup export` of the instance to node2.
func (b *bench) export(ctx context.Context, src source) (sample, error) {
	op := harness.Op("OP_BACKUP_EXPORT", "instance_name", src.name, "target_node", "node2", "mode", "local",
		"shutdown", true, "compress", b.o.compress)
	s, err := timedJob(ctx, b.ca, op)
	s.cpu = b.cpu()
	if err != nil {
		return s, err
	}
	return s, b.check(src, b.exportDump(src.name))
}

// importExport runs `backup import` of the instance's export on node2
// (exporting first, untimed, if no export case made one): the instance is
// removed and imported again under its own name onto node1, so that no
// rename script changes the disk (the tiny OS's rewrites /etc/hostname),
// and the imported instance is the source of the next cases.
func (b *bench) importExport(ctx context.Context, src *source) (sample, error) {
	if _, err := os.Stat(b.exportDump(src.name)); err != nil {
		if _, err := b.export(ctx, *src); err != nil {
			return sample{}, fmt.Errorf("the export to import: %w", err)
		}
	}
	if err := harness.RunJob(ctx, b.ca, harness.Op("OP_INSTANCE_REMOVE", "instance_name", src.name)); err != nil {
		return sample{}, fmt.Errorf("removing %s before its import: %w", src.name, err)
	}
	op := harness.Op("OP_INSTANCE_CREATE", "instance_name", src.name, "mode", "import", "src_node", "node2", "src_path", src.name,
		"disk_template", "file", "disks", []any{map[string]any{"size": b.o.sizeMiB}}, "nics", []any{},
		"hypervisor", "fake", "pnode", "node1", "start", false, "compress", b.o.compress)
	s, err := timedJob(ctx, b.ca, op)
	s.cpu = b.cpu()
	if err != nil {
		return s, err
	}
	if src.path, err = diskPath(ctx, b.ca, b.a.State.StateDir, "node1", src.name); err != nil {
		return s, err
	}
	return s, b.check(*src, src.path)
}

// move runs `corral instance move` of the instance to the second cluster
// under its own name (no rename script), keeping the source, then removes
// the copy there.
func (b *bench) move(ctx context.Context, src source) (sample, error) {
	args := append([]string{"instance", "move", "--keep-source-instance", "--dest-primary-node", "node1",
		"--compress", b.o.compress}, b.moveArgs...)
	args = append(args, src.name)
	t0 := time.Now()
	out, err := b.corral(b.a, args...)
	s := sample{total: time.Since(t0), cpu: b.cpu()}
	if err != nil {
		return s, fmt.Errorf("%w: %s", err, out)
	}
	p, err := diskPath(ctx, b.cb, b.b.State.StateDir, "node1", src.name)
	if err == nil {
		err = b.checkPayload(src, p)
	}
	if rerr := harness.RunJob(ctx, b.cb, harness.Op("OP_INSTANCE_REMOVE", "instance_name", src.name)); rerr != nil && err == nil {
		err = fmt.Errorf("removing %s on the destination: %w", src.name, rerr)
	}
	return s, err
}

// check compares a copy of src's disk with src's disk, byte for byte
// (without -verify: its size).
func (b *bench) check(src source, copy string) error {
	if !b.o.verify {
		fi, err := os.Stat(copy)
		if err != nil {
			return err
		}
		if fi.Size() != b.size {
			return fmt.Errorf("%s has %d bytes, want %d", copy, fi.Size(), b.size)
		}
		return nil
	}
	return harness.SameContent(src.ref, copy)
}

// checkPayload compares the data file in the file system of an OS path's
// copy with the data written into it: the move's destination runs the
// rename script, which rewrites /etc/hostname and the file system's
// metadata.
func (b *bench) checkPayload(src source, copy string) error {
	if src.mode == "raw" || !b.o.verify {
		return b.check(src, copy)
	}
	out := filepath.Join(b.dir, "payload.out")
	defer os.Remove(out)
	if msg, err := exec.Command("debugfs", "-R", "dump "+payloadFile+" "+out, copy).CombinedOutput(); err != nil {
		return fmt.Errorf("reading the data file of %s: %w: %s", copy, err, msg)
	}
	return harness.SameContent(src.payload, out)
}

// timedJob submits one job, waits for its success and times it; the data
// phase runs from its "Exporting"/"Importing" log line to its last "done"
// line (corrald's timestamps).
func timedJob(ctx context.Context, c *luxi.Client, op map[string]any) (sample, error) {
	t0 := time.Now()
	id, err := c.SubmitJob(ctx, []any{op})
	if err != nil {
		return sample{}, err
	}
	var first, last float64
	status, _, err := luxi.WaitForJob(ctx, c, id, func(e []any) {
		if len(e) < 4 {
			return
		}
		msg, _ := e[3].(string)
		switch {
		case strings.HasPrefix(msg, "Exporting ") || strings.HasPrefix(msg, "Importing "):
			first = harness.TS(e[1])
		case strings.Contains(msg, ": done, "):
			last = harness.TS(e[1])
		}
	})
	s := sample{total: time.Since(t0)}
	if err != nil {
		return s, fmt.Errorf("job %d (%s): %w", id, status, err)
	}
	if first > 0 && last > first {
		s.data = time.Duration((last - first) * float64(time.Second))
	}
	return s, nil
}
