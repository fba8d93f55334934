package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// qcow2 is a reader of the common qcow2 image: version 2 or 3, no
// encryption, no backing file, no external data file, no extended L2
// entries and no compressed clusters. It reads the virtual disk through
// the L1 and L2 tables; unallocated and zero clusters read as zeros.
// It is not safe for concurrent use.
type qcow2 struct {
	r           io.ReaderAt
	fileSize    int64
	size        int64
	clusterBits uint
	l2Bits      uint
	l1          []uint64

	l2Off   uint64 // offset of the cached L2 table, 0 = none
	l2Cache []uint64
}

var errQcow2 = errors.New("unsupported or corrupt qcow2 image")

const (
	qcow2Magic       = 0x514649fb
	qcow2OffsetMask  = 0x00fffffffffffe00 // bits 9-55
	qcow2Compressed  = 1 << 62
	qcow2ZeroFlag    = 1 // L2 entry bit 0 (version 3)
	qcow2MaxL1Bytes  = 32 << 20
	qcow2MaxVirtSize = 1 << 56
)

// isQcow2 reports whether the header starts with qcow2's magic.
func isQcow2(head []byte) bool {
	return len(head) >= 4 && binary.BigEndian.Uint32(head) == qcow2Magic
}

// openQcow2 reads and checks the header and the L1 table of an image of
// fileSize bytes.
func openQcow2(r io.ReaderAt, fileSize int64) (*qcow2, error) {
	h := make([]byte, 104)
	if n, err := r.ReadAt(h[:72], 0); n < 72 {
		return nil, fmt.Errorf("%w: short header: %w", errQcow2, err)
	}
	be := binary.BigEndian
	if be.Uint32(h) != qcow2Magic {
		return nil, fmt.Errorf("%w: not qcow2", errQcow2)
	}
	version := be.Uint32(h[4:])
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("%w: version %d", errQcow2, version)
	}
	if be.Uint64(h[8:]) != 0 {
		return nil, fmt.Errorf("%w: images with a backing file are not supported", errQcow2)
	}
	if be.Uint32(h[32:]) != 0 {
		return nil, fmt.Errorf("%w: encrypted images are not supported", errQcow2)
	}
	if version == 3 {
		if n, err := r.ReadAt(h[72:104], 72); n < 32 {
			return nil, fmt.Errorf("%w: short version 3 header: %w", errQcow2, err)
		}
		// Bits: 0 dirty (refcounts only), 1 corrupt, 2 external data file,
		// 3 compression type (matters only for compressed clusters),
		// 4 extended L2 entries.
		if inc := be.Uint64(h[72:]); inc&^(1|1<<3) != 0 {
			return nil, fmt.Errorf("%w: incompatible features %#x", errQcow2, inc)
		}
	}
	q := &qcow2{r: r, fileSize: fileSize, clusterBits: uint(be.Uint32(h[20:]))}
	if q.clusterBits < 9 || q.clusterBits > 21 {
		return nil, fmt.Errorf("%w: cluster bits %d", errQcow2, q.clusterBits)
	}
	q.l2Bits = q.clusterBits - 3
	size := be.Uint64(h[24:])
	if size > qcow2MaxVirtSize {
		return nil, fmt.Errorf("%w: virtual size %d", errQcow2, size)
	}
	q.size = int64(size)
	l1Size := uint64(be.Uint32(h[36:]))
	perL1 := uint64(1) << (q.clusterBits + q.l2Bits)
	need := (size + perL1 - 1) / perL1
	if l1Size < need || l1Size*8 > qcow2MaxL1Bytes {
		return nil, fmt.Errorf("%w: L1 table of %d entries for %d bytes", errQcow2, l1Size, size)
	}
	l1Off := be.Uint64(h[40:])
	if l1Off > uint64(fileSize) || l1Size*8 > uint64(fileSize)-l1Off {
		return nil, fmt.Errorf("%w: L1 table outside the file", errQcow2)
	}
	raw := make([]byte, need*8)
	if _, err := r.ReadAt(raw, int64(l1Off)); err != nil && !(errors.Is(err, io.EOF) && len(raw) == 0) {
		return nil, fmt.Errorf("%w: reading the L1 table: %w", errQcow2, err)
	}
	q.l1 = make([]uint64, need)
	for i := range q.l1 {
		q.l1[i] = be.Uint64(raw[i*8:])
	}
	return q, nil
}

// Size is the virtual disk's size in bytes.
func (q *qcow2) Size() int64 { return q.size }

// ReadAt reads the virtual disk.
func (q *qcow2) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", errQcow2)
	}
	n := 0
	for n < len(p) {
		if off >= q.size {
			return n, io.EOF
		}
		csize := int64(1) << q.clusterBits
		in := off & (csize - 1)
		chunk := min(int64(len(p)-n), csize-in, q.size-off)
		host, err := q.hostCluster(uint64(off))
		if err != nil {
			return n, err
		}
		dst := p[n : n+int(chunk)]
		if host == 0 {
			clear(dst)
		} else if _, err := q.r.ReadAt(dst, int64(host)+in); err != nil {
			return n, fmt.Errorf("%w: reading a data cluster: %w", errQcow2, err)
		}
		n += int(chunk)
		off += chunk
	}
	return n, nil
}

// hostCluster maps a virtual offset to its data cluster's offset in the
// file; 0 means the cluster reads as zeros.
func (q *qcow2) hostCluster(off uint64) (uint64, error) {
	l1i := off >> (q.clusterBits + q.l2Bits)
	l2Off := q.l1[l1i] & qcow2OffsetMask
	if l2Off == 0 {
		return 0, nil
	}
	csize := uint64(1) << q.clusterBits
	if l2Off&(csize-1) != 0 || l2Off > uint64(q.fileSize)-min(csize, uint64(q.fileSize)) {
		return 0, fmt.Errorf("%w: L2 table at %#x outside the file or unaligned", errQcow2, l2Off)
	}
	if q.l2Off != l2Off {
		raw := make([]byte, csize)
		if _, err := q.r.ReadAt(raw, int64(l2Off)); err != nil {
			return 0, fmt.Errorf("%w: reading an L2 table: %w", errQcow2, err)
		}
		if q.l2Cache == nil {
			q.l2Cache = make([]uint64, csize/8)
		}
		for i := range q.l2Cache {
			q.l2Cache[i] = binary.BigEndian.Uint64(raw[i*8:])
		}
		q.l2Off = l2Off
	}
	e := q.l2Cache[(off>>q.clusterBits)&(1<<q.l2Bits-1)]
	if e&qcow2Compressed != 0 {
		return 0, fmt.Errorf("%w: compressed clusters are not supported (convert the image without -c)", errQcow2)
	}
	if e&qcow2ZeroFlag != 0 {
		return 0, nil
	}
	host := e & qcow2OffsetMask
	if host == 0 {
		return 0, nil
	}
	if host&(csize-1) != 0 || host > uint64(q.fileSize) {
		return 0, fmt.Errorf("%w: data cluster at %#x outside the file or unaligned", errQcow2, host)
	}
	return host, nil
}
