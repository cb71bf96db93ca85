package control

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/loopr-dev/loopr/internal/fastjson"
	"github.com/loopr-dev/loopr/scheduler"
)

// WriteScheduler writes the debug plan at now (`loopr debug scheduler`) to
// w as JSON — the bytes of json.Marshal(Scheduler(now)) — one row at a
// time, without building the api.SchedRow of every waiting loop first. It
// returns how many rows it wrote.
func (s *Service) WriteScheduler(w io.Writer, now time.Time) (int, error) {
	_, d, err := s.Plan(now)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	head, err := appendViewHead(make([]byte, 0, 256), d, now)
	if err != nil {
		return 0, err
	}
	if _, err := bw.Write(head); err != nil {
		return 0, err
	}
	buf := make([]byte, 0, 512)
	for i := range d.Rows {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, err = appendSchedRow(buf, &d.Rows[i], now); err != nil {
			return 0, err
		}
		if _, err := bw.Write(buf); err != nil {
			return 0, err
		}
	}
	if _, err := bw.WriteString("]}"); err != nil {
		return 0, err
	}
	return len(d.Rows), bw.Flush()
}

// appendViewHead appends api.SchedulerView's JSON up to its rows' "[".
func appendViewHead(b []byte, d scheduler.Decision, now time.Time) ([]byte, error) {
	o := fastjson.Begin(b)
	o.Key("now")
	var err error
	if o.B, err = fastjson.AppendTime(o.B, now); err != nil {
		return nil, fmt.Errorf("now: %w", err)
	}
	o.Int("waiting", int64(d.Waiting))
	o.Int("eligible", int64(d.Eligible))
	o.Int("running", int64(d.Running))
	o.Int("slots", int64(d.Slots))
	o.Key("rows")
	return append(o.B, '['), nil
}

// appendSchedRow appends json.Marshal(Row(*r, now)).
func appendSchedRow(b []byte, r *scheduler.Row, now time.Time) ([]byte, error) {
	l, sc := r.Loop, r.Score
	o := fastjson.Begin(b)
	o.Str("id", l.ID)
	o.Str("type", l.Type)
	o.Str("status", string(l.Status))
	o.Str("title", l.Title)
	o.Int("priority", int64(sc.Priority))
	o.Int("base", int64(sc.Base))
	o.Int("age_boost", int64(sc.AgeBoost))
	o.Int("depth", int64(sc.Depth))
	o.Int("depth_boost", int64(sc.DepthBoost))
	o.Int("iteration", int64(sc.Iteration))
	o.Int("retry_penalty", int64(sc.RetryPenalty))
	o.Bool("runnable", r.Runnable)
	o.Key("reasons")
	o.B = append(o.B, '[')
	for i, re := range r.Reasons {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = fastjson.AppendString(o.B, string(re.Code))
	}
	o.B = append(o.B, ']')
	o.Key("reason_text")
	o.B = append(o.B, '[')
	for i, re := range r.Reasons {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = fastjson.AppendString(o.B, re.Text)
	}
	o.B = append(o.B, ']')
	o.Int("age_seconds", max(0, int64(now.Sub(l.CreatedAt)/time.Second)))
	if r.Tier != 0 {
		o.Int("tier", int64(r.Tier))
	}
	if r.Key != "" {
		o.Str("fairness_key", r.Key)
	}
	var err error
	for _, f := range []struct {
		k string
		v float64
	}{{"key_used", r.KeyUsed}, {"cost", r.Cost}} {
		if f.v != 0 {
			o.Key(f.k)
			if o.B, err = fastjson.AppendFloat(o.B, f.v); err != nil {
				return nil, fmt.Errorf("loop %s: %s %s: %w", l.ID, f.k, strconv.FormatFloat(f.v, 'g', -1, 64), err)
			}
		}
	}
	if r.Agent != "" {
		o.Str("agent", r.Agent)
	}
	return o.End(), nil
}
