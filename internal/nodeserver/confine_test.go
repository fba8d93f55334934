package nodeserver

import (
	"context"
	"log/slog"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/kvm"
)

type fakeConfiner struct {
	hypervisor.Hypervisor // only the confiner methods are called
	id                    kvm.Identity
	released              []string
}

func (f *fakeConfiner) Identity(ctx context.Context, spec hypervisor.InstanceSpec) (kvm.Identity, error) {
	return f.id, nil
}

func (f *fakeConfiner) ReleaseIdentity(uuid string) error {
	f.released = append(f.released, uuid)
	return nil
}

func TestQemuOwnerFor(t *testing.T) {
	s := &Server{opts: Options{QemuUser: "corral-qemu"}, log: slog.New(slog.DiscardHandler), qemuUID: 5, qemuGID: 6}
	ctx := context.Background()
	spec := func(model string, nics int) hypervisor.InstanceSpec {
		sp := hypervisor.InstanceSpec{Name: "vm", UUID: "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", HVParams: map[string]string{"security_model": model}}
		for i := range nics {
			sp.NICs = append(sp.NICs, hypervisor.NICSpec{Index: i, Tap: "t"})
		}
		return sp
	}

	o, err := s.qemuOwnerFor(ctx, &fakeConfiner{}, spec("none", 1))
	if err != nil || o.name != "corral-qemu" || o.uid != 5 || o.gid != 6 {
		t.Fatalf("model none: %+v, %v", o, err)
	}

	named := &fakeConfiner{id: kvm.Identity{Name: "pool7", UID: 2007, GID: 2007, Pool: true}}
	o, err = s.qemuOwnerFor(ctx, named, spec("pool", 1))
	if err != nil || o.name != "pool7" || o.uid != 2007 {
		t.Fatalf("named pool uid: %+v, %v", o, err)
	}
	o.release()
	if len(named.released) != 1 {
		t.Fatalf("release did not reach the driver: %v", named.released)
	}

	// A pool uid without a user name: the taps go to the bare uid, and
	// nothing is given back since the start goes on.
	bare := &fakeConfiner{id: kvm.Identity{Name: "2008:2008", UID: 2008, GID: 2008, Pool: true}}
	for _, nics := range []int{0, 1} {
		o, err := s.qemuOwnerFor(ctx, bare, spec("pool", nics))
		if err != nil || o.uid != 2008 || o.gid != 2008 || o.name != "2008" {
			t.Fatalf("nameless pool uid with %d NICs: %+v, %v", nics, o, err)
		}
	}
	if len(bare.released) != 0 {
		t.Errorf("the uid was given back: %v", bare.released)
	}
}
