package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// The codec: how records, events and keys become bytes. Everything that
// knows the encoding lives in this file and loopcodec.go (the binary loop
// records of schema version 2), so changing it is two files and a migration.

// Bucket names.
var (
	bucketMeta      = []byte("meta")
	bucketLoops     = []byte("loops")
	bucketIdxStatus = []byte("idx_status")
	bucketIdxParent = []byte("idx_parent")
	bucketEvents    = []byte("events")
	bucketIdxEvents = []byte("idx_events")

	allBuckets = [][]byte{bucketMeta, bucketLoops, bucketIdxStatus, bucketIdxParent, bucketEvents, bucketIdxEvents}
)

// sep separates the parts of an index key; it never occurs in an id or a status.
const sep = 0x00

func encodeLoop(l loop.Loop) ([]byte, error) {
	l = utc(l)
	return appendLoop(make([]byte, 0, 256+len(l.Task)+len(l.Feedback)), &l), nil
}

func decodeLoop(id, b []byte) (loop.Loop, error) {
	var l loop.Loop
	if err := decodeLoopInto(id, b, &l, false); err != nil {
		return loop.Loop{}, err
	}
	return l, nil
}

// decodeHead decodes every field of a record but its long texts (task,
// artifact, workdir, feedback, reason) and its lease.
func decodeHead(id, b []byte) (loop.Loop, error) {
	var l loop.Loop
	if err := decodeLoopInto(id, b, &l, true); err != nil {
		return loop.Loop{}, err
	}
	return l, nil
}

func encodeEvent(ev loop.Event) ([]byte, error) {
	ev.Time = ev.Time.UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("event %d: encode: %w", ev.Seq, err)
	}
	return b, nil
}

func decodeEvent(seq uint64, b []byte) (loop.Event, error) {
	var ev loop.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return loop.Event{}, damaged(fmt.Errorf("event %d: decode: %w", seq, err))
	}
	return ev, nil
}

func encodeMeta(key string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("meta %s: encode: %w", key, err)
	}
	return b, nil
}

func decodeMeta(key string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return damaged(fmt.Errorf("meta %s: decode: %w", key, err))
	}
	return nil
}

// utc returns l with every time in UTC (SPEC §2: times are RFC 3339 UTC), so
// stored and exported records do not depend on the writer's time zone. The
// lease is copied, not shared.
func utc(l loop.Loop) loop.Loop {
	for _, t := range []*time.Time{&l.CreatedAt, &l.UpdatedAt, &l.StartedAt, &l.FinishedAt, &l.RunnableAt, &l.Deadline} {
		*t = t.UTC()
	}
	if l.Lease != nil {
		lease := *l.Lease
		lease.ExpiresAt = lease.ExpiresAt.UTC()
		l.Lease = &lease
	}
	return l
}

// indexKey returns a 0x00 b, the key of b under a in an index.
func indexKey(a, b string) []byte {
	k := make([]byte, 0, len(a)+1+len(b))
	k = append(k, a...)
	k = append(k, sep)
	return append(k, b...)
}

// indexPrefix returns a 0x00: the prefix of every key under a.
func indexPrefix(a string) []byte { return append([]byte(a), sep) }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func eventIndexKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(id), seq)
}

// splitIndexKey returns the parts of an index key made by indexKey.
func splitIndexKey(k []byte) (a, b []byte, ok bool) {
	return bytes.Cut(k, []byte{sep})
}
