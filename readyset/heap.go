package readyset

// heapOf is a binary min-heap of entries that remember their position (so
// any entry can be removed or fixed in O(log n)), in the style of
// container/heap without the interface boxing.
type heapOf struct {
	items []*entry
	less  func(a, b *entry) bool
	pos   func(e *entry) *int // where e keeps its index; -1 when not in the heap
}

func (h *heapOf) len() int { return len(h.items) }

func (h *heapOf) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i]) = i
	*h.pos(h.items[j]) = j
}

func (h *heapOf) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *heapOf) down(i int) bool {
	i0 := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// init restores the heap order after items were appended without it.
func (h *heapOf) init() {
	for i, e := range h.items {
		*h.pos(e) = i
	}
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// add appends e without restoring the order (call init after a run of adds).
func (h *heapOf) add(e *entry) {
	*h.pos(e) = len(h.items)
	h.items = append(h.items, e)
}

func (h *heapOf) push(e *entry) {
	*h.pos(e) = len(h.items)
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

func (h *heapOf) top() *entry { return h.items[0] }

// remove takes e out of the heap; e must be in it.
func (h *heapOf) remove(e *entry) {
	i := *h.pos(e)
	n := len(h.items) - 1
	if i != n {
		h.swap(i, n)
	}
	h.items[n] = nil
	h.items = h.items[:n]
	*h.pos(e) = -1
	if i != n && !h.down(i) {
		h.up(i)
	}
}

func (h *heapOf) pop() *entry {
	e := h.items[0]
	h.remove(e)
	return e
}
