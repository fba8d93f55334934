package k8sbm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store/boltstore"
)

func testDB(t *testing.T) *confdb.DB {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := confdb.Bootstrap(context.Background(), st, &config.Cluster{Meta: config.Meta{Name: "c"}, ClusterName: "c"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// addMachine stores a machine; mod changes it first.
func addMachine(t *testing.T, db *confdb.DB, name, class string, mod func(m *config.Machine)) {
	t.Helper()
	m := &config.Machine{Meta: config.Meta{Name: name}, Driver: "fake-hardware", ProvisionState: "available", ResourceClass: class}
	if mod != nil {
		mod(m)
	}
	tx := db.Begin()
	tx.PutMachine(m)
	if err := db.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

func names(ms []*config.Machine) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

func TestChooseMachinesTakesOnlyFreeMachinesOfTheClass(t *testing.T) {
	db := testDB(t)
	addMachine(t, db, "bm-c", "gpu", nil)
	addMachine(t, db, "bm-a", "gpu", nil)
	addMachine(t, db, "bm-b", "gpu", func(m *config.Machine) { m.InstanceUUID = "someone" })
	addMachine(t, db, "bm-d", "gpu", func(m *config.Machine) { m.ProvisionState = "active" })
	addMachine(t, db, "bm-e", "gpu", func(m *config.Machine) { m.Maintenance = true })
	addMachine(t, db, "bm-f", "gpu", func(m *config.Machine) { m.Reservation = "job-3" })
	addMachine(t, db, "BM_G", "gpu", nil) // not a kube node name
	addMachine(t, db, "bm-h", "cpu", nil)
	got, err := chooseMachines(db.Machines(), "gpu", 2, "w")
	if err != nil || names(got) != "bm-a,bm-c" {
		t.Fatalf("choose 2 gpu: %s %v", names(got), err)
	}
	if got, err := chooseMachines(db.Machines(), "", 3, "w"); err != nil || names(got) != "bm-a,bm-c,bm-h" {
		t.Fatalf("choose 3 of any class: %s %v", names(got), err)
	}
	_, err = chooseMachines(db.Machines(), "gpu", 3, "w")
	if ecode.ClassOf(err) != ecode.NoRes || !strings.Contains(err.Error(), `node group w needs 3 more bare-metal machines of resource class "gpu" in state available with no instance; 2 are`) {
		t.Fatalf("too few: %v", err)
	}
}

// TestConcurrentClaimsNeverShareAMachine: groups claiming at once each
// get machines of their own, and the one that finds too few fails saying
// so; each machine's instance_uuid names its group and its image is set.
func TestConcurrentClaimsNeverShareAMachine(t *testing.T) {
	db := testDB(t)
	for _, n := range []string{"m1", "m2", "m3", "m4", "m5"} {
		addMachine(t, db, n, "", nil)
	}
	const groups = 4
	var wg sync.WaitGroup
	got := make([][]*config.Machine, groups)
	errs := make([]error, groups)
	for i := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := &config.COENodeGroup{Meta: config.Meta{UUID: "group-" + string(rune('a'+i)), Name: "w"}}
			got[i], errs[i] = claimMachines(context.Background(), db, g, "", "http://img/x.raw", 2)
		}()
	}
	wg.Wait()
	owner := map[string]string{}
	claimedOK := 0
	for i := range groups {
		if errs[i] != nil {
			if ecode.ClassOf(errs[i]) != ecode.NoRes && ecode.ClassOf(errs[i]) != ecode.TempNoRes {
				t.Errorf("claim %d: %v", i, errs[i])
			}
			continue
		}
		claimedOK++
		for _, m := range got[i] {
			if o, dup := owner[m.Name]; dup {
				t.Fatalf("machine %s claimed by %s and %d", m.Name, o, i)
			}
			owner[m.Name] = string(rune('a' + i))
		}
	}
	if claimedOK != 2 {
		t.Fatalf("%d claims of 2 succeeded over 5 machines, want 2: %v", claimedOK, errs)
	}
	for _, m := range db.Machines() {
		o, ok := owner[m.Name]
		if ok != (m.InstanceUUID != "") || (ok && m.InstanceUUID != "group-"+o) {
			t.Errorf("machine %s: instance_uuid %q, claimed by %q", m.Name, m.InstanceUUID, o)
		}
		if ok && m.InstanceInfo[keyImageSource] != "http://img/x.raw" {
			t.Errorf("machine %s: instance_info %v", m.Name, m.InstanceInfo)
		}
	}
	// Releasing gives a machine back; another group's release leaves it.
	var some string
	for n := range owner {
		some = n
		break
	}
	m, _ := db.Machine(some)
	if err := releaseMachine(context.Background(), db, m.UUID, "group-other"); err != nil {
		t.Fatal(err)
	}
	if m2, _ := db.Machine(some); m2.InstanceUUID != m.InstanceUUID {
		t.Fatalf("another group's release took %s", some)
	}
	if err := releaseMachine(context.Background(), db, m.UUID, m.InstanceUUID); err != nil {
		t.Fatal(err)
	}
	if m2, _ := db.Machine(some); m2.InstanceUUID != "" || m2.InstanceInfo[keyImageSource] != nil {
		t.Fatalf("released %s: %+v", some, m2)
	}
}

func TestToReleaseTakesTheNamedThenTheUnlistedThenTheLast(t *testing.T) {
	ms := func(ns ...string) []*config.Machine {
		var out []*config.Machine
		for _, n := range ns {
			out = append(out, &config.Machine{Meta: config.Meta{Name: n}})
		}
		return out
	}
	claimed := ms("a", "b", "c", "d")
	for _, tc := range []struct {
		listed []string
		keep   int
		remove []string
		want   string
	}{
		{[]string{"a", "b", "c", "d"}, 4, nil, ""},
		{[]string{"a", "b", "c", "d"}, 2, nil, "d,c"},
		{[]string{"a", "b", "c", "d"}, 3, []string{"a"}, "a"},
		{[]string{"a", "b", "c", "d"}, 2, []string{"b"}, "b,d"},
		{[]string{"d", "a", "b"}, 2, nil, "c,b"},
		{nil, 0, nil, "a,b,c,d"},
	} {
		if got := names(toRelease(claimed, tc.listed, tc.keep, tc.remove)); got != tc.want {
			t.Errorf("toRelease(listed %v, keep %d, remove %v) = %s, want %s", tc.listed, tc.keep, tc.remove, got, tc.want)
		}
	}
}

// TestJoinConfigIsWhatAKubeletTakes: the config drive's cloud-config
// writes the CA, a bootstrap kubeconfig naming the API server, the CA and
// the token, and the kubelet's flags; tokens are Kubernetes' format and
// differ each time.
func TestJoinConfigIsWhatAKubeletTakes(t *testing.T) {
	id, sec, err := newBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	if !bootstrapIDOK(id) || len(sec.Reveal()) != 16 {
		t.Fatalf("token %q.%d chars", id, len(sec.Reveal()))
	}
	if id2, sec2, _ := newBootstrapToken(); id2 == id || sec2 == sec {
		t.Fatal("two tokens alike")
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	j := JoinConfig{ClusterName: "k1", NodeName: "bm-1", Server: "https://10.0.0.1:6443", CACert: ca, Token: tokenOf(id, sec)}
	cd, err := j.ConfigDrive("m-uuid")
	if err != nil {
		t.Fatal(err)
	}
	if md := cd["meta_data"].(map[string]any); md["uuid"] != "m-uuid" || md["hostname"] != "bm-1" {
		t.Errorf("meta_data %v", md)
	}
	// What the Bare Metal API and the job store keep: plain JSON.
	raw, err := json.Marshal(cd)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	files, err := ReadConfigDrive(back)
	if err != nil {
		t.Fatal(err)
	}
	if files[CACertPath] != string(ca) {
		t.Errorf("ca.crt %q", files[CACertPath])
	}
	if want := `KUBELET_EXTRA_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --hostname-override=bm-1"`; strings.TrimSpace(files[KubeletDefaultsPath]) != want {
		t.Errorf("kubelet defaults %q", files[KubeletDefaultsPath])
	}
	var kc struct {
		Clusters []struct {
			Name    string `json:"name"`
			Cluster struct {
				Server string `json:"server"`
				CAData string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Token string `json:"token"`
			} `json:"user"`
		} `json:"users"`
		Current string `json:"current-context"`
	}
	if err := json.Unmarshal([]byte(files[BootstrapKubeconfigPath]), &kc); err != nil {
		t.Fatal(err)
	}
	caData, _ := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CAData)
	if kc.Clusters[0].Cluster.Server != j.Server || string(caData) != string(ca) || kc.Users[0].User.Token != id+"."+sec.Reveal() || kc.Current != "default" {
		t.Errorf("bootstrap kubeconfig %+v", kc)
	}
	if _, err := ReadConfigDrive(map[string]any{"user_data": "#!/bin/sh\n"}); err == nil {
		t.Error("a shell script read as a cloud-config")
	}
}

func bootstrapIDOK(id string) bool {
	if len(id) != 6 {
		return false
	}
	for _, r := range id {
		if !strings.ContainsRune(tokenAlphabet, r) {
			return false
		}
	}
	return true
}

func TestResourceClassFallsBackToTheClusterThenTheTemplate(t *testing.T) {
	c := &driver.Cluster{COECluster: &config.COECluster{}, Template: &config.COETemplate{FlavorID: "tpl"}}
	g := &config.COENodeGroup{}
	if got := resourceClass(c, g); got != "tpl" {
		t.Errorf("template's: %q", got)
	}
	c.FlavorID = "cluster"
	if got := resourceClass(c, g); got != "cluster" {
		t.Errorf("cluster's: %q", got)
	}
	g.FlavorID = "group"
	if got := resourceClass(c, g); got != "group" {
		t.Errorf("group's: %q", got)
	}
}

// TestDeadlineEndsBeforeTheCreates: during a create the group gives up two
// polls before the create's own deadline; afterwards (a resize) it counts
// the create_timeout from the start of its wait.
func TestDeadlineEndsBeforeTheCreates(t *testing.T) {
	created := time.Unix(1_000_000, 0)
	d := &Driver{PollInterval: 5 * time.Second, Now: func() time.Time { return created.Add(time.Hour) }}
	c := &driver.Cluster{COECluster: &config.COECluster{Meta: config.Meta{CTime: float64(created.Unix())},
		CreateTimeout: 1, Status: config.COECreateInProgress, Placement: map[string]any{placeWait + "w": float64(created.Unix() + 30)}}}
	if got, timeout := d.deadline(c, placeWait+"w"); !got.Equal(created.Add(50*time.Second)) || timeout != time.Minute {
		t.Errorf("during the create: %v (%v), want creation+50s", got.Sub(created), timeout)
	}
	c.Status = config.COECreateComplete
	if got, _ := d.deadline(c, placeWait+"w"); !got.Equal(created.Add(90 * time.Second)) {
		t.Errorf("after the create: %v, want wait start+1m", got.Sub(created))
	}
}
