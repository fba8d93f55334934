package storage

import (
	"context"
	"os"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// TestFileGrowFormats grows raw images and refuses qcow2 ones, whose
// virtual size truncate would not change.
func TestFileGrowFormats(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		head  []byte // written at the start of the image
		class ecode.Class
	}{
		{name: "sparse raw"},
		{name: "raw with data", head: []byte("\xeb\x63\x90 boot sector")},
		{name: "qcow2", head: []byte{'Q', 'F', 'I', 0xfb, 0, 0, 0, 3}, class: ecode.Inval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFile(t.TempDir())
			d := Disk{UUID: "d1", SizeMiB: 2, Template: TemplateFile}
			p, err := f.Create(ctx, "i1", d, KeepOwner())
			if err != nil {
				t.Fatal(err)
			}
			if tc.head != nil {
				w, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.WriteAt(tc.head, 0); err != nil {
					t.Fatal(err)
				}
				w.Close()
			}
			err = f.Grow(ctx, "i1", d, 5)
			st, serr := os.Stat(p)
			if serr != nil {
				t.Fatal(serr)
			}
			if tc.class != "" {
				if ecode.ClassOf(err) != tc.class {
					t.Fatalf("grow: %v, want class %s", err, tc.class)
				}
				if st.Size() != 2*mib {
					t.Fatalf("refused grow changed the size to %d", st.Size())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != 5*mib {
				t.Fatalf("size %d, want %d", st.Size(), 5*mib)
			}
		})
	}
}
