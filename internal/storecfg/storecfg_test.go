package storecfg

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Config
		err      string // substring of the error; "" = valid
	}{
		{name: "bbolt", in: `{"backend":"bbolt"}`, want: Bolt()},
		{name: "etcd https", in: `{"backend":"etcd","endpoints":["https://10.0.0.1:2379","https://[::1]:2379"],"prefix":"/corral/c1/","cert_file":"etcd-client.pem","key_file":"etcd-client.key","ca_file":"/etc/corral/ca.pem"}`,
			want: Config{Backend: BackendEtcd, Endpoints: []string{"https://10.0.0.1:2379", "https://[::1]:2379"}, Prefix: "/corral/c1/",
				CertFile: "etcd-client.pem", KeyFile: "etcd-client.key", CAFile: "/etc/corral/ca.pem"}},
		{name: "etcd http", in: `{"backend":"etcd","endpoints":["http://127.0.0.1:2379"],"prefix":"/x/"}`,
			want: Config{Backend: BackendEtcd, Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/x/"}},
		{name: "no backend", in: `{}`, err: "no backend"},
		{name: "unknown backend", in: `{"backend":"zk"}`, err: "unknown backend"},
		{name: "unknown field", in: `{"backend":"bbolt","endpoint":"x"}`, err: "unknown field"},
		{name: "trailing data", in: `{"backend":"bbolt"} {}`, err: "after the JSON"},
		{name: "not json", in: `backend=bbolt`, err: "invalid store record"},
		{name: "bbolt with endpoints", in: `{"backend":"bbolt","endpoints":["http://a:1"]}`, err: "no etcd settings"},
		{name: "etcd without endpoints", in: `{"backend":"etcd","prefix":"/x/"}`, err: "at least one endpoint"},
		{name: "bad scheme", in: `{"backend":"etcd","endpoints":["unix:///tmp/s"],"prefix":"/x/"}`, err: "scheme"},
		{name: "no port", in: `{"backend":"etcd","endpoints":["http://10.0.0.1"],"prefix":"/x/"}`, err: "host:port"},
		{name: "path", in: `{"backend":"etcd","endpoints":["http://10.0.0.1:2379/v3"],"prefix":"/x/"}`, err: "only scheme"},
		{name: "user", in: `{"backend":"etcd","endpoints":["http://u:p@10.0.0.1:2379"],"prefix":"/x/"}`, err: "only scheme"},
		{name: "mixed", in: `{"backend":"etcd","endpoints":["http://a:1","https://b:2"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a"}`, err: "mixed"},
		{name: "https without files", in: `{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/"}`, err: "certificate, key and CA"},
		{name: "https with some files", in: `{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c"}`, err: "certificate, key and CA"},
		{name: "http with files", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a"}`, err: "plain http"},
		{name: "no prefix", in: `{"backend":"etcd","endpoints":["http://a:1"]}`, err: "prefix"},
		{name: "root prefix", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/"}`, err: "prefix"},
		{name: "prefix without slash", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/corral/x"}`, err: "prefix"},
		{name: "prefix empty element", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/corral//x/"}`, err: "empty or dot"},
		{name: "prefix dotdot", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/corral/../"}`, err: "empty or dot"},
		{name: "prefix space", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/a b/"}`, err: "spaces"},
		{name: "managed", in: `{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a","managed_members":{"client_port":2379,"peer_port":2380}}`,
			want: Config{Backend: BackendEtcd, Endpoints: []string{"https://a:1"}, Prefix: "/x/", CertFile: "c", KeyFile: "k", CAFile: "a",
				Managed: &ManagedMembers{ClientPort: 2379, PeerPort: 2380}}},
		{name: "managed over http", in: `{"backend":"etcd","endpoints":["http://a:1"],"prefix":"/x/","managed_members":{"client_port":2379,"peer_port":2380}}`, err: "need https"},
		{name: "managed same ports", in: `{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a","managed_members":{"client_port":2379,"peer_port":2379}}`, err: "different"},
		{name: "managed no ports", in: `{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a","managed_members":{}}`, err: "out of range"},
		{name: "managed bbolt", in: `{"backend":"bbolt","managed_members":{"client_port":1,"peer_port":2}}`, err: "no etcd settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%s) = %+v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%s) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestLoadSave(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(dir)
	if err != nil || !reflect.DeepEqual(c, Bolt()) {
		t.Fatalf("Load without a record = %+v, %v; want bbolt", c, err)
	}
	want := Config{Backend: BackendEtcd, Endpoints: []string{"https://127.0.0.1:2379"}, Prefix: DefaultPrefix("c1"),
		CertFile: FileEtcdClientCert, KeyFile: FileEtcdClientKey, CAFile: FileClusterCA}
	if err := Save(dir, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(Path(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	got, err := Load(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	if err := Save(dir, Config{Backend: BackendEtcd}); err == nil {
		t.Fatal("Save of an invalid record succeeded")
	}
	if got, _ := Load(dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("a refused Save changed the record: %+v", got)
	}
	if err := os.WriteFile(Path(dir), []byte(`{"backend":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), Path(dir)) {
		t.Fatalf("Load of a torn record: %v; want an error naming the file", err)
	}
	if err := os.WriteFile(Path(dir), make([]byte, maxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("Load of a huge record: %v", err)
	}
}

func TestFile(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"", ""}, {"etcd-client.pem", "/m/etcd-client.pem"}, {"/etc/ca.pem", "/etc/ca.pem"}, {"sub/x", "/m/sub/x"},
	} {
		if got := File("/m", tc.name); got != tc.want {
			t.Errorf("File(/m, %q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCLIDoesNotLinkEtcd holds the design rule that etcd client code stays
// in corrald: the CLI reads store.json through this package only.
func TestCLIDoesNotLinkEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pkg  string
		want bool
	}{{"./cmd/corral", false}, {"./cmd/corrald", true}} {
		cmd := exec.Command(goBin, "list", "-deps", tc.pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		if got := strings.Contains(string(out), "go.etcd.io/etcd/client/v3\n"); got != tc.want {
			t.Errorf("%s links the etcd client: %v, want %v", tc.pkg, got, tc.want)
		}
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives Save and Load unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"backend":"bbolt"}`,
		`{"backend":"etcd","endpoints":["https://10.0.0.1:2379"],"prefix":"/corral/c1/","cert_file":"etcd-client.pem","key_file":"etcd-client.key","ca_file":"ca.pem"}`,
		`{"backend":"etcd","endpoints":["http://127.0.0.1:2379","http://127.0.0.2:2379"],"prefix":"/a/b/"}`,
		`{"backend":"etcd","endpoints":["http://[::1]:1"],"prefix":"/x/"}`,
		`{}`, `null`, `[]`, `{"backend":"etcd","endpoints":null}`,
		`{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a","managed_members":{"client_port":2379,"peer_port":2380}}`,
		`{"backend":"etcd","endpoints":["https://a:1"],"prefix":"/x/","cert_file":"c","key_file":"k","ca_file":"a","managed_members":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted %q but Validate refuses it: %v", b, err)
		}
		dir := t.TempDir()
		if err := Save(dir, c); err != nil {
			t.Fatalf("Save of parsed %q: %v", b, err)
		}
		got, err := Load(dir)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", b, got, err, c)
		}
	})
}
