package scheduler

import "slices"

// order sorts keys by p.Order, ties in seed 004's order (compareKeys): the
// hook a reference policy (loopr sim --compare fifo, cpf) orders by. It
// changes the order only; the gates and admission walk are the same.
// Fairness does not order the rows then.
func (w *walk) order(keys []sortKey) {
	rows := make([]Row, len(w.s.Waiting))
	for i := range keys {
		k := &keys[i]
		rows[k.idx] = Row{Loop: w.s.Waiting[k.idx].Loop, Score: w.scores[k.idx], Tier: int(k.tier)}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if c := w.p.Order(&rows[a.idx], &rows[b.idx]); c != 0 {
			return c
		}
		return compareKeys(a, b)
	})
}
