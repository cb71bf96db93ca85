package control

import (
	"bufio"
	"io"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/scheduler"
)

// WriteScheduler writes the debug plan at now (`loopr debug scheduler`) to
// w as JSON and a newline — the bytes of json.Marshal(Scheduler(now)), but
// for invalid UTF-8 (see store.WriteJSON) — one row at a time, without building the api.SchedRow of every waiting
// loop first. It returns how many rows it wrote.
//
// The view and each row are encoded from api.SchedulerView's and
// api.SchedRow's struct tags by github.com/go-json-experiment/json with
// encoding/json's options, so a field added to either appears here with
// no change: the rows' slice is left empty in the view, and a marshaler
// for its type writes the rows of the plan in its place as they are
// converted.
func (s *Service) WriteScheduler(w io.Writer, now time.Time) (int, error) {
	_, d, err := s.Plan(now)
	if err != nil {
		return 0, err
	}
	return writeView(w, d, now)
}

// writeView writes the view of d at now.
func writeView(w io.Writer, d scheduler.Decision, now time.Time) (int, error) {
	v := api.SchedulerView{Now: now, Waiting: d.Waiting, Eligible: d.Eligible, Running: d.Running, Slots: d.Slots,
		Rows: []api.SchedRow{}}
	rows := json.MarshalToFunc(func(enc *jsontext.Encoder, _ []api.SchedRow) error {
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		var row api.SchedRow // one row's wire form at a time
		for i := range d.Rows {
			fillRow(&row, &d.Rows[i], now)
			if err := json.MarshalEncode(enc, &row, json.WithMarshalers(nil)); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndArray)
	})
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := jsontext.NewEncoder(bw, jsonv1.DefaultOptionsV1())
	if err := json.MarshalEncode(enc, &v, jsonv1.DefaultOptionsV1(), json.WithMarshalers(rows)); err != nil {
		return 0, err
	}
	return len(d.Rows), bw.Flush()
}
