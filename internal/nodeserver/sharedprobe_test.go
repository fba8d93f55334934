package nodeserver

import (
	"context"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func TestSharedDirProbe(t *testing.T) {
	s := &Server{}
	ctx := context.Background()
	dir := t.TempDir()
	probe := func(op, name, content string) (nodeapi.SharedDirProbeReply, error) {
		r, err := s.sharedDirProbe(ctx, nodeapi.SharedDirProbeArgs{Dir: dir, Name: name, Op: op, Content: content})
		out, _ := r.(nodeapi.SharedDirProbeReply)
		return out, err
	}
	if r, err := probe(nodeapi.ProbeWrite, ".corral-probe-1", "abc"); err != nil || r.Closed == "" {
		// t.TempDir's parent is 0700.
		t.Fatalf("write: %+v %v, want the closed directory on the way named", r, err)
	}
	if r, err := probe(nodeapi.ProbeRead, ".corral-probe-1", ""); err != nil || !r.Found || r.Content != "abc" {
		t.Fatalf("read: %+v %v", r, err)
	}
	if _, err := probe(nodeapi.ProbeRemove, ".corral-probe-1", ""); err != nil {
		t.Fatal(err)
	}
	if r, err := probe(nodeapi.ProbeRead, ".corral-probe-1", ""); err != nil || r.Found {
		t.Fatalf("read after remove: %+v %v", r, err)
	}
	for _, name := range []string{"passwd", ".corral-probe-/../x", "../.corral-probe-1"} {
		if _, err := probe(nodeapi.ProbeWrite, name, "x"); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("probe name %q: %v, want refused", name, err)
		}
	}
	if _, err := s.sharedDirProbe(ctx, nodeapi.SharedDirProbeArgs{Dir: "rel", Name: ".corral-probe-1", Op: nodeapi.ProbeRead}); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("relative dir: %v", err)
	}
}
