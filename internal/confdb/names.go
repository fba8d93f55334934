package confdb

import (
	"slices"
	"strings"
)

// Names of instances and nodes are DNS names: as in Ganeti and DNS, they
// are unique and found regardless of case ("Web1" is "web1"), and their
// index keys in the store are the folded name, so the store itself refuses
// a second object whose name differs only in case. Node group names are
// not DNS names and stay case-sensitive, as in Ganeti.
//
// A configuration written before names were folded has index keys spelled
// as the names were, and may hold two names differing only in case. It
// still loads: each such object is found by its exact spelling, a lookup
// in another case is ambiguous and finds neither, and deleting or renaming
// one leaves the other's index key in place.

// foldName is a DNS name's case-insensitive form.
func foldName(name string) string { return strings.ToLower(name) }

func keepName(name string) string { return name }

// nameIndex maps the names of one kind of object to their uuids.
type nameIndex struct {
	fold   func(string) string
	exact  map[string]string   // name -> uuid
	folded map[string][]string // fold(name) -> names
}

func newNameIndex(fold func(string) string) *nameIndex {
	return &nameIndex{fold: fold, exact: map[string]string{}, folded: map[string][]string{}}
}

func (x *nameIndex) add(name, uuid string) {
	if name == "" {
		return // unnamed objects (bare-metal machines may be) have no entry
	}
	if _, ok := x.exact[name]; !ok {
		f := x.fold(name)
		x.folded[f] = append(x.folded[f], name)
	}
	x.exact[name] = uuid
}

func (x *nameIndex) remove(name string) {
	if _, ok := x.exact[name]; !ok {
		return
	}
	delete(x.exact, name)
	f := x.fold(name)
	l := slices.DeleteFunc(slices.Clone(x.folded[f]), func(n string) bool { return n == name })
	if len(l) == 0 {
		delete(x.folded, f)
	} else {
		x.folded[f] = l
	}
}

// lookup finds name's uuid: its exact spelling first, then the one name
// equal to it but for case.
func (x *nameIndex) lookup(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if u, ok := x.exact[name]; ok {
		return u, true
	}
	if l := x.folded[x.fold(name)]; len(l) == 1 {
		return x.exact[l[0]], true
	}
	return "", false
}

// holders lists the names that name would collide with.
func (x *nameIndex) holders(name string) []string { return x.folded[x.fold(name)] }

// key is the store's index key of name under prefix pfx.
func (x *nameIndex) key(pfx, name string) string { return pfx + x.fold(name) }

// staleKeys are the index keys to delete when the object named name (of
// uuid) drops that name: its folded key unless another object still
// folds to it, and the key spelled as the name if an older version wrote
// that one.
func (x *nameIndex) staleKeys(pfx, name, uuid string) []string {
	if name == "" {
		return nil
	}
	var out []string
	shared := false
	for _, n := range x.holders(name) {
		if x.exact[n] != uuid {
			shared = true
		}
	}
	if !shared {
		out = append(out, x.key(pfx, name))
	}
	if legacy := pfx + name; legacy != x.key(pfx, name) {
		out = append(out, legacy)
	}
	return out
}
