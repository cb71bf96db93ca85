// Package store keeps loopr's durable state — loop records, their event
// journal and a little daemon metadata — in one bbolt file (Open), or in
// etcd (OpenEtcd) where several machines can reach it. It is the only
// package that imports bbolt or the etcd client.
//
// # Backends
//
// Every Tx method reads and writes through a small key-value seam (kv.go):
// a bucket with Get, Put, Delete, a sequence and a cursor. The bbolt
// backend is the file's real buckets; the etcd backend (etcd.go) keeps
// the same keys under "<prefix>/<bucket>/", reads a transaction at one
// revision, and commits its writes in one etcd transaction that compares
// every key and range it read, running fn again if another writer got
// there first. Followers on etcd are fed by a watch (etcdfollow.go), so
// they see other processes' commits too. CheckFile, Repair, the
// corruption guard and Batch's group commit are bbolt's alone. Raw keys
// (raw.go) hold, on etcd only, what the daemons sharing a store as
// workers keep beside the records (package cluster).
//
// # Layout
//
// Every bucket is top level; keys are bytes, values are the codec's encoding
// (codec.go; loop records in the binary layout of loopcodec.go since schema
// version 2, everything else JSON):
//
//	meta        key → JSON value; "schema_version" (an int) and daemon state such as "ratelimit"
//	loops       loop id → loop record (binary: its head — every scheduling field — then its long texts)
//	idx_status  status 0x00 loop id → empty     (which loops have a status, in id order)
//	idx_parent  parent 0x00 loop id → empty     (a loop's children, in id order)
//	events      seq (8 bytes, big endian) → event (the global journal, in seq order)
//	idx_events  loop id 0x00 seq → empty        (one loop's journal, in seq order)
//
// Loop ids are 1–64 characters of [A-Za-z0-9_-] (loop.ValidID) and statuses
// are lowercase words, so the 0x00 separator never occurs inside a part and a
// prefix scan over "x\x00" finds exactly the entries for x.
//
// # Guarantees
//
// The guarantees below are the bbolt file's; on etcd the same hold with
// etcd's transactions in place of bbolt's, except where they name the file.
//
//   - One process at a time: Open takes bbolt's exclusive file lock, waiting at
//     most Options.Timeout, and never hangs. A second opener gets a
//     *LockedError naming the holder's pid, read from the "<path>.pid" file the
//     holder writes after taking the lock.
//   - Records and indexes never disagree: Put, Create and Delete change a
//     record and its index entries in the same bbolt transaction, and
//     Store.Check verifies both bbolt's page structure and the indexes.
//   - One logical change is one transaction: a caller that moves a loop puts
//     the record and appends its event inside a single Update, so a crash
//     leaves both or neither.
//   - Schema: the "schema_version" meta key records the layout. Open runs the
//     ordered migrations from the stored version up to SchemaVersion in one
//     transaction, and refuses with a *SchemaError, writing nothing, a store
//     written by a newer loopr.
//   - Records are decoded inside the transaction; nothing returned by this
//     package aliases bbolt's memory-mapped pages.
//   - Followers (Follow) are told every committed change to the loop records,
//     in commit order, exactly once: the daemon's in-memory scheduling index
//     stays in step with the file without reading it again.
//   - A damaged file is an error, never a panic: Open, View, Update, Batch
//     and ForEachHead recover bbolt's panics on pages it cannot read (and
//     memory faults) and return a *CorruptError (errors.Is ErrCorrupt) that
//     names `loopr store repair`. CheckFile lists every problem of a file;
//     Repair copies every readable record into a fresh file and keeps the
//     damaged one (check.go, repair.go, corrupt.go).
//
// Import and Export move loop records as JSON Lines (one encoding/json object
// of loop.Loop per line, in id order). An import is all-or-nothing.
package store
