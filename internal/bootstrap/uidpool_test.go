package bootstrap

import (
	"testing"

	"github.com/corral/corral/internal/config"
)

func TestConfinedDefaults(t *testing.T) {
	tests := []struct {
		name      string
		pool      [][2]uint32
		set       config.Params
		wantModel any
		wantCh    any
	}{
		{"no pool keeps none", nil, nil, "none", false},
		{"pool turns on pool and chroot", [][2]uint32{{2000, 2009}}, nil, "pool", true},
		{"explicit -H wins", [][2]uint32{{2000, 2009}}, config.Params{"security_model": "none", "use_chroot": false}, "none", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hvp := map[string]config.Params{"kvm": {"security_model": "none", "use_chroot": false}}
			if tt.set != nil {
				hvp["kvm"] = config.Fill(hvp["kvm"], tt.set)
			}
			confinedDefaults(InitOptions{UIDPool: tt.pool, HVParams: map[string]config.Params{"kvm": tt.set}}, hvp)
			if hvp["kvm"]["security_model"] != tt.wantModel || hvp["kvm"]["use_chroot"] != tt.wantCh {
				t.Errorf("kvm params %v", hvp["kvm"])
			}
		})
	}
}
