package sshkeys

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PubKeys is the public-key file of potential master candidates: for each
// node uuid, its key lines. Ganeti's ganeti_pub_keys has the same format:
// "<node uuid> <key line>" per line, split at the first space; empty lines
// are ignored and a node may have several lines (old and new key during a
// renewal).
type PubKeys map[string][]string

// ParsePubKeys reads the file. Every key line must parse.
func ParsePubKeys(data string) (PubKeys, error) {
	out := PubKeys{}
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		uuid, key, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: no key after the node uuid", i+1)
		}
		key = strings.TrimSpace(key)
		if _, err := ParsePublic(key); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if !slices.Contains(out[uuid], key) {
			out[uuid] = append(out[uuid], key)
		}
	}
	return out, nil
}

// String renders the file, nodes sorted, so equal contents give equal
// files.
func (p PubKeys) String() string {
	var b strings.Builder
	for _, uuid := range slices.Sorted(maps.Keys(p)) {
		for _, k := range p[uuid] {
			b.WriteString(uuid + " " + k + "\n")
		}
	}
	return b.String()
}

// Has reports whether key (whatever its comment) is listed for any node.
func (p PubKeys) Has(key string) bool {
	for _, ks := range p {
		for _, k := range ks {
			if SameKey(k, key) {
				return true
			}
		}
	}
	return false
}

// The cluster's keys in authorized_keys sit between these lines; the rest
// of the file is the administrator's and is kept as it is.
const (
	BlockBegin = "# BEGIN corral cluster keys (managed by corral-node; edits here are lost)"
	BlockEnd   = "# END corral cluster keys"
)

// SetBlock returns authorized_keys content with the cluster block replaced
// by keys (or removed when keys is empty); lines outside the block are
// kept, except lines holding one of the keys in drop (a shared cluster key
// being retired).
func SetBlock(current string, keys, drop []string) string {
	var outside []string
	in := false
	for _, line := range strings.Split(current, "\n") {
		switch {
		case line == BlockBegin:
			in = true
			continue
		case line == BlockEnd:
			in = false
			continue
		case in:
			continue
		}
		if dropped(line, drop) {
			continue
		}
		outside = append(outside, line)
	}
	for len(outside) > 0 && outside[len(outside)-1] == "" {
		outside = outside[:len(outside)-1]
	}
	var b strings.Builder
	for _, l := range outside {
		b.WriteString(l + "\n")
	}
	if len(keys) > 0 {
		b.WriteString(BlockBegin + "\n")
		for _, k := range keys {
			b.WriteString(k + "\n")
		}
		b.WriteString(BlockEnd + "\n")
	}
	return b.String()
}

func dropped(line string, drop []string) bool {
	if len(drop) == 0 {
		return false
	}
	// An authorized_keys line may start with options; the key is the
	// first two fields that parse as one.
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if k, err := ParsePublic(f[i] + " " + f[i+1]); err == nil {
			for _, d := range drop {
				if SameKey(k.Line(), d) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// Block returns the key lines inside the cluster block.
func Block(current string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(current, "\n") {
		switch {
		case line == BlockBegin:
			in = true
		case line == BlockEnd:
			in = false
		case in && strings.TrimSpace(line) != "":
			out = append(out, line)
		}
	}
	return out
}
