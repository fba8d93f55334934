package driver

import (
	"context"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// fakeMachine is what the fake BMC remembers of one machine.
type fakeMachine struct {
	power      string
	bootDevice string
	persistent bool
	cd         string
}

// fakeBMCs holds every fake machine of this process, so a driver made for
// the next call on the same machine sees the state the last one left.
var fakeBMCs = struct {
	sync.Mutex
	m map[string]*fakeMachine
}{m: map[string]*fakeMachine{}}

// Fake is the fake-hardware driver: a BMC that obeys at once and keeps its
// state in memory.
type Fake struct{ key string }

func newFake(info map[string]any, o options) (*Fake, error) {
	key, err := infoString(info, "fake_machine_id", false)
	if err != nil {
		return nil, err
	}
	if key == "" {
		key = o.machineUUID
	}
	if key == "" {
		return nil, ecode.Errorf(ecode.Inval, "fake-hardware needs driver_info fake_machine_id or the machine's uuid")
	}
	return &Fake{key: key}, nil
}

// with runs f on the machine's state, making it (powered off) on first use.
func (f *Fake) with(fn func(*fakeMachine)) {
	fakeBMCs.Lock()
	defer fakeBMCs.Unlock()
	m, ok := fakeBMCs.m[f.key]
	if !ok {
		m = &fakeMachine{power: PowerOff}
		fakeBMCs.m[f.key] = m
	}
	fn(m)
}

func (f *Fake) Validate(ctx context.Context) error { return nil }

func (f *Fake) PowerState(ctx context.Context) (string, error) {
	var p string
	f.with(func(m *fakeMachine) { p = m.power })
	return p, nil
}

func (f *Fake) SetPower(ctx context.Context, target string, timeout time.Duration) error {
	if err := checkPowerTarget(target); err != nil {
		return err
	}
	f.with(func(m *fakeMachine) {
		if target == PowerOff || target == SoftPowerOff {
			m.power = PowerOff
			return
		}
		m.power = PowerOn
		if !m.persistent {
			m.bootDevice = ""
		}
	})
	return nil
}

func (f *Fake) SetBootDevice(ctx context.Context, dev string, persistent bool) error {
	if err := checkBootDevice(dev); err != nil {
		return err
	}
	f.with(func(m *fakeMachine) { m.bootDevice, m.persistent = dev, persistent })
	return nil
}

func (f *Fake) BootDevice(ctx context.Context) (string, error) {
	var d string
	f.with(func(m *fakeMachine) { d = m.bootDevice })
	return d, nil
}

func (f *Fake) InsertCD(ctx context.Context, url string) error {
	if url == "" {
		return ecode.Errorf(ecode.Inval, "virtual media needs an image URL")
	}
	f.with(func(m *fakeMachine) { m.cd = url })
	return nil
}

func (f *Fake) EjectCD(ctx context.Context) error {
	f.with(func(m *fakeMachine) { m.cd = "" })
	return nil
}

// InsertedCD returns the image in the fake machine's virtual CD drive, for
// tests of callers.
func (f *Fake) InsertedCD() string {
	var cd string
	f.with(func(m *fakeMachine) { cd = m.cd })
	return cd
}
