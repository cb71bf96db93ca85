package config

import (
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Suggestions for an unknown key: a near spelling of a key the section
// has ("max_loop" → max_loops), else the places the same key is known
// elsewhere (a top-level "validate" → loops.ralph.validate).

// unknownKey is the message for name, a key that the section of type t
// does not have; top says the section is the file's top level, where a
// key of a section is most often put by mistake.
func unknownKey(name string, t reflect.Type, top bool) string {
	if near := nearest(name, slices.Collect(mapKeys(fieldsOf(t)))); near != "" {
		return "unknown key; did you mean " + near + "?"
	}
	if at := knownAt(name); top && len(at) > 0 {
		return "unknown key; did you mean " + strings.Join(at, " or ") + "?"
	}
	return "unknown key"
}

func mapKeys(m map[string][]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// nearest returns the key closest to name by edit distance, when it is at
// most 2 edits away and fewer than half name's length (so "tier" does not
// suggest "tags"); "" when none is. Ties go to the first in sorted order.
func nearest(name string, keys []string) string {
	slices.Sort(keys)
	best, bestD := "", 3
	for _, k := range keys {
		if d := editDistance(strings.ToLower(name), k); d < bestD && 2*d < len(name) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counting an
// adjacent swap as one edit (optimal string alignment).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// knownAt returns the dotted keys, at most three, whose last part is name.
func knownAt(name string) []string {
	var out []string
	for _, k := range allKeys() {
		if k == name || strings.HasSuffix(k, "."+name) {
			out = append(out, k)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// allKeys lists every dotted key of loopr.yml in the order of Config's
// fields; the entries of a map section are named by an example
// (loops.ralph, agents.<name>).
var allKeys = sync.OnceValue(func() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" && opts == "inline" {
				walk(f.Type, prefix)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			key := prefix + name
			out = append(out, key)
			switch ft := f.Type; {
			case ft.Kind() == reflect.Struct:
				walk(ft, key+".")
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				entry := map[string]string{"loops": "ralph", "quotas": "<owner>"}[name]
				if entry == "" {
					entry = "<name>"
				}
				walk(ft.Elem(), key+"."+entry+".")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
})
