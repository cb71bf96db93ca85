package store

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The bbolt file layout pagescan reads (go.etcd.io/bbolt/internal/common,
// stable since bolt's first release): a page is a 16-byte header — id
// uint64, flags uint16, count uint16, overflow uint32 — then count
// elements of 16 bytes. A branch element is pos, ksize uint32 and the
// child's page id; a leaf element is flags, pos, ksize, vsize uint32, its
// key pos bytes after the element, its value right after the key. A leaf
// element with flag 1 is a bucket: its value starts with the bucket's root
// page id (0: the bucket's own leaf page follows inline) and sequence.
const (
	pageHeaderSize   = 16
	pageElementSize  = 16
	pageFlagBranch   = 0x01
	pageFlagLeaf     = 0x02
	leafFlagBucket   = 0x01
	bucketHeaderSize = 16
)

// scanPageRefs walks every B+tree of the file from the root bucket's page
// with plain reads, and returns a problem for each page reference bbolt
// could not follow safely: a child page at or above the high-water mark,
// a page referenced twice (a cycle), a page whose header names another id,
// an element out of its page's bounds. bbolt's own Tx.Check follows such a
// reference on a goroutine of its own, where the memory fault it causes
// cannot be recovered: CheckFile runs it only when this finds nothing.
// The scan reports what it found unsafe: unsafe when bbolt's Tx.Check must
// not run (a reference outside the file, or a cycle), and cyclic, the
// top-level buckets ("" for the root) whose tree loops back on itself:
// bbolt's descent into those never ends, so nothing may read them.
func scanPageRefs(r io.ReaderAt, pageSize int, root, hwm uint64) (problems []string, unsafe bool, cyclic map[string]bool) {
	s := pageScan{r: r, pageSize: pageSize, hwm: hwm, seen: map[uint64]bool{}, onPath: map[uint64]bool{}, cyclic: map[string]bool{}}
	s.page(root, "root bucket", "")
	return s.problems, s.unsafe, s.cyclic
}

type pageScan struct {
	r        io.ReaderAt
	pageSize int
	hwm      uint64
	seen     map[uint64]bool
	onPath   map[uint64]bool // the pages from the root to the current one
	problems []string
	unsafe   bool
	cyclic   map[string]bool
}

func (s *pageScan) add(format string, args ...any) {
	if len(s.problems) < maxProblems {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// page reads page id (what, in top-level bucket top) and follows its
// references.
func (s *pageScan) page(id uint64, what, top string) {
	switch {
	case id < 2 || id >= s.hwm:
		s.add("pages: %s: page %d is outside the file's pages [2, %d)", what, id, s.hwm)
		s.unsafe = true
		return
	case s.onPath[id]:
		s.add("pages: %s: page %d refers back to itself through its children", what, id)
		s.unsafe = true
		s.cyclic[top] = true
		return
	case s.seen[id]:
		s.add("pages: %s: page %d is referenced twice", what, id)
		return
	}
	s.seen[id] = true
	s.onPath[id] = true
	defer delete(s.onPath, id)
	head := make([]byte, pageHeaderSize)
	if _, err := s.r.ReadAt(head, int64(id)*int64(s.pageSize)); err != nil {
		s.add("pages: %s: page %d: %v", what, id, err)
		return
	}
	if got := binary.LittleEndian.Uint64(head); got != id {
		s.add("pages: %s: page %d says it is page %d", what, id, got)
		return
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if id+overflow >= s.hwm {
		s.add("pages: %s: page %d runs %d pages past the file's end", what, id, overflow)
		s.unsafe = true
		return
	}
	for i := uint64(1); i <= overflow; i++ {
		s.seen[id+i] = true
	}
	buf := make([]byte, (overflow+1)*uint64(s.pageSize))
	if _, err := s.r.ReadAt(buf, int64(id)*int64(s.pageSize)); err != nil {
		s.add("pages: %s: page %d: %v", what, id, err)
		return
	}
	s.elements(buf, fmt.Sprintf("page %d", id), what, top)
}

// elements follows the references of the page in buf (a page of the file,
// or an inline bucket's page inside a value).
func (s *pageScan) elements(buf []byte, name, what, top string) {
	flags := binary.LittleEndian.Uint16(buf[8:])
	count := int(binary.LittleEndian.Uint16(buf[10:]))
	if pageHeaderSize+count*pageElementSize > len(buf) {
		s.add("pages: %s: %s: %d elements do not fit in it", what, name, count)
		return
	}
	for i := range count {
		off := pageHeaderSize + i*pageElementSize
		e := buf[off : off+pageElementSize]
		switch {
		case flags&pageFlagBranch != 0:
			s.page(binary.LittleEndian.Uint64(e[8:]), what, top)
		case flags&pageFlagLeaf != 0:
			if binary.LittleEndian.Uint32(e)&leafFlagBucket == 0 {
				continue
			}
			pos, ksize, vsize := uint64(binary.LittleEndian.Uint32(e[4:])), uint64(binary.LittleEndian.Uint32(e[8:])), uint64(binary.LittleEndian.Uint32(e[12:]))
			start := uint64(off) + pos
			if start+ksize+vsize > uint64(len(buf)) || vsize < bucketHeaderSize {
				s.add("pages: %s: %s: element %d is out of its page", what, name, i)
				return
			}
			key := buf[start : start+ksize]
			val := buf[start+ksize : start+ksize+vsize]
			sub, subTop := fmt.Sprintf("bucket %q", key), top
			if top == "" && what == "root bucket" {
				subTop = string(key)
			}
			if root := binary.LittleEndian.Uint64(val); root != 0 {
				s.page(root, sub, subTop)
			} else if inline := val[bucketHeaderSize:]; len(inline) >= pageHeaderSize {
				s.elements(inline, "inline page", sub, subTop)
			}
		default:
			s.add("pages: %s: %s is neither a branch nor a leaf (flags %#x)", what, name, flags)
			return
		}
	}
}
