package daemon

import "runtime/debug"

// bigAnswer is the number of rows (or waiting loops planned) from which an
// answer's memory is handed back to the operating system once it is sent.
const bigAnswer = 10_000

// afterBigAnswer returns the memory of a large one-off answer (the debug
// plan of 100k waiting loops builds ~70 MB that nothing keeps) to the
// operating system right away, instead of leaving the daemon's resident
// set at its peak until the runtime's background scavenger gets to it: a
// daemon sits resident for days, and one `loopr debug scheduler` should
// not cost it 200 MB for hours. It runs after the answer, off the
// request's path.
func (d *daemon) afterBigAnswer(rows int) {
	if rows >= bigAnswer {
		go debug.FreeOSMemory()
	}
}
