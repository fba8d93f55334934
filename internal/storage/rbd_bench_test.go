package storage

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/corral/corral/internal/cephtest"
)

// BenchmarkDiskThroughput compares what a guest's qemu gets from an rbd
// disk (librbd, one-host Ceph, cache=none) and from a file disk (O_DIRECT):
// qemu-img bench through qemu's block layer, 4 MiB sequential requests,
// 16 in flight. Run: go test -run XXX -bench DiskThroughput ./internal/storage/
func BenchmarkDiskThroughput(b *testing.B) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		b.Skip("qemu-img not installed")
	}
	c := cephtest.Start(b, cephtest.Options{OSDs: 2})
	ctx := context.Background()
	const sizeMiB, reqMiB = 256, 4
	params := map[string]string{RBDParamPool: c.Pool, RBDParamConf: c.Conf, RBDParamKeyring: c.Keyring}
	d := Disk{UUID: "bench", SizeMiB: sizeMiB, Params: params}
	r := NewRBD()
	if _, err := r.Create(ctx, "inst", d, KeepOwner()); err != nil {
		b.Fatal(err)
	}
	l, _ := r.Location("inst", d)
	f := NewFile(b.TempDir())
	fp, err := f.Create(ctx, "inst", d, KeepOwner())
	if err != nil {
		b.Fatal(err)
	}
	targets := map[string]string{
		"file": fp,
		"rbd":  "rbd:" + l.Spec() + ":id=" + l.Client + ":conf=" + l.Conf + ":keyring=" + l.Keyring,
	}
	for _, name := range []string{"file", "rbd"} {
		for _, mode := range []string{"write", "read"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				count := sizeMiB / reqMiB
				args := []string{"bench", "-f", "raw", "-t", "none", "-d", "16", "-s", strconv.Itoa(reqMiB << 20), "-c", strconv.Itoa(count)}
				if mode == "write" {
					args = append(args, "-w")
				}
				b.SetBytes(sizeMiB << 20)
				for i := 0; i < b.N; i++ {
					if out, err := exec.Command("qemu-img", append(args, targets[name])...).CombinedOutput(); err != nil {
						b.Fatalf("qemu-img bench: %v: %s", err, out)
					}
				}
			})
		}
	}
}
