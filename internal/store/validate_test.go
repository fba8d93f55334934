package store

import (
	"errors"
	"strings"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a", "b"},
		{"jobs/", "jobs0"},
		{"a\xff", "b"},
		{"\xff\xff", ""},
		{"a\xfe", "a\xff"},
	}
	for _, tc := range tests {
		if got := PrefixEnd(tc.in); got != tc.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCheckTxn(t *testing.T) {
	puts := func(n int) []Op {
		ops := make([]Op, n)
		for i := range ops {
			ops[i] = Put(strings.Repeat("k", i+1), nil)
		}
		return ops
	}
	tests := []struct {
		name      string
		cmps      []Cmp
		then, els []Op
		want      error
	}{
		{"empty", nil, nil, nil, nil},
		{"max ops", nil, puts(MaxOpsPerTxn), puts(MaxOpsPerTxn), nil},
		{"too many ops", nil, puts(MaxOpsPerTxn + 1), nil, ErrTooLarge},
		{"too many bytes", []Cmp{{Key: "k", Target: CmpValue, Value: make([]byte, MaxTxnBytes)}}, nil, nil, ErrTooLarge},
		{"empty cmp key", []Cmp{Missing("")}, nil, nil, ErrInvalid},
		{"bad target", []Cmp{{Key: "k", Target: 9}}, nil, nil, ErrInvalid},
		{"bad operator", []Cmp{{Key: "k", Op: -1}}, nil, nil, ErrInvalid},
		{"empty put key", nil, []Op{Put("", nil)}, nil, ErrInvalid},
		{"empty get key", nil, nil, []Op{Get("")}, ErrInvalid},
		{"empty prefix ok", nil, []Op{GetPrefix(""), DeletePrefix("")}, nil, nil},
		{"bad op", nil, []Op{{Type: 42, Key: "k"}}, nil, ErrInvalid},
		{"put twice", nil, []Op{Put("a", nil), Get("a"), Put("a", nil)}, nil, ErrDuplicateKey},
		{"put and delete", nil, []Op{Delete("a"), Put("a", nil)}, nil, ErrDuplicateKey},
		{"put under prefix delete", nil, []Op{Put("a/b", nil), DeletePrefix("a/")}, nil, ErrDuplicateKey},
		{"same key in both branches", nil, []Op{Put("a", nil)}, []Op{Put("a", nil)}, nil},
		{"delete twice", nil, []Op{Delete("a"), Delete("a"), DeletePrefix("")}, nil, nil},
		{"put beside prefix", nil, []Op{Put("a0", nil), DeletePrefix("a/")}, nil, nil},
	}
	for _, tc := range tests {
		err := CheckTxn(tc.cmps, tc.then, tc.els)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCmpMatches(t *testing.T) {
	kv := &KV{Key: "k", Value: []byte("m"), CreateRevision: 3, ModRevision: 7, Version: 2}
	tests := []struct {
		cmp  Cmp
		kv   *KV
		want bool
	}{
		{ModRevisionIs("k", 7), kv, true},
		{ModRevisionIs("k", 6), kv, false},
		{Cmp{Key: "k", Target: CmpModRevision, Op: Greater, Rev: 6}, kv, true},
		{Cmp{Key: "k", Target: CmpCreateRevision, Op: Less, Rev: 3}, kv, false},
		{Cmp{Key: "k", Target: CmpVersion, Op: NotEqual, Rev: 1}, kv, true},
		{Cmp{Key: "k", Target: CmpValue, Op: Less, Value: []byte("n")}, kv, true},
		{Cmp{Key: "k", Target: CmpValue, Op: Greater, Value: []byte("m")}, kv, false},
		{Exists("k"), kv, true},
		{Missing("k"), nil, true},
		{Exists("k"), nil, false},
		{Cmp{Key: "k", Target: CmpValue, Op: NotEqual}, nil, true},
		{Cmp{Key: "k", Target: CmpValue, Op: Equal}, nil, false},
		{Cmp{Key: "k", Target: CmpValue, Op: Less, Value: []byte("z")}, nil, false},
		{Cmp{Key: "k", Target: CmpModRevision, Op: CmpOp(9)}, kv, false},
	}
	for i, tc := range tests {
		if got := tc.cmp.Matches(tc.kv); got != tc.want {
			t.Errorf("%d: %+v on %+v = %v, want %v", i, tc.cmp, tc.kv, got, tc.want)
		}
	}
}
