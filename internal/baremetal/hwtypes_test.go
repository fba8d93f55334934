package baremetal

import (
	"slices"
	"testing"
)

// ipmi machines may stream their console over SOL; nothing else can, and
// a new machine has no console until asked.
func TestConsoleInterfaces(t *testing.T) {
	ipmi, err := LookupHardwareType("ipmi")
	if err != nil {
		t.Fatal(err)
	}
	if got := ipmi.Enabled[IfConsole]; !slices.Equal(got, []string{"no-console", "ipmitool-sol"}) {
		t.Errorf("ipmi console interfaces %v", got)
	}
	if d := defaultImpl(ipmi, IfConsole); d != "no-console" {
		t.Errorf("ipmi default console %q", d)
	}
	for _, name := range []string{"redfish", "fake-hardware"} {
		h, err := LookupHardwareType(name)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(h.Enabled[IfConsole], "ipmitool-sol") {
			t.Errorf("%s offers ipmitool-sol", name)
		}
	}
}
