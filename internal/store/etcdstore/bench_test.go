package etcdstore

import (
	"testing"

	"github.com/corral/corral/internal/store/storetest"
)

// The benchmarks mirror boltstore's so the backends compare directly. They
// run against the shared single-member etcd on loopback, whose writes are
// durable (etcd fsyncs its log before answering), over plain connections.

// BenchmarkTxnPutParallel: etcd batches concurrent proposals into shared
// fsyncs as boltstore's group commit does.
func BenchmarkTxnPutParallel(b *testing.B) { storetest.BenchTxnPutParallel(b, openT(b, Options{})) }

// BenchmarkGet measures a linearizable read of one key.
func BenchmarkGet(b *testing.B) { storetest.BenchGet(b, openT(b, Options{})) }

func BenchmarkRange1000(b *testing.B) { storetest.BenchRange1000(b, openT(b, Options{})) }
