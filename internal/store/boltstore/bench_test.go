package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/store/storetest"
)

// BenchmarkTxnPutParallel measures durable (fsynced) transactions;
// concurrent callers share commits.
func BenchmarkTxnPutParallel(b *testing.B) {
	s := openB(b, Options{})
	storetest.BenchTxnPutParallel(b, s)
	if c := s.commits.Load(); c > 0 {
		b.ReportMetric(float64(s.batched.Load())/float64(c), "txns/commit")
	}
}

func BenchmarkGet(b *testing.B) { storetest.BenchGet(b, openB(b, Options{NoSync: true})) }

func BenchmarkRange1000(b *testing.B) { storetest.BenchRange1000(b, openB(b, Options{NoSync: true})) }

func openB(b *testing.B, opts Options) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "corral.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
